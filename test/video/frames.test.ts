/**
 * Raw frames over pipes (frames.ts): fixed-size frames out of arbitrary chunks, and buffers reused
 * through a pool once the encoder has written them.
 */
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BufferPool, readFrames, writeFrame } from '../../src/processors/video/frames.js';

describe('frames over pipes', () => {
  it('splits chunks of any size into whole frames from the pool, dropping a partial tail', async () => {
    const bytes = Uint8Array.from({ length: 3 * 6 + 4 }, (_, i) => i);
    const chunks = [bytes.subarray(0, 5), bytes.subarray(5, 6), bytes.subarray(6, 17), bytes.subarray(17)];
    const pool = new BufferPool(4);
    const out: number[][] = [];
    for await (const f of readFrames(Readable.from(chunks.map((c) => Buffer.from(c))), 6, pool)) {
      out.push([...f]);
      pool.give(f); // handed back at once: the next frame may reuse its buffer
    }
    expect(out).toEqual([0, 1, 2].map((k) => [0, 1, 2, 3, 4, 5].map((i) => k * 6 + i)));
  });

  it('reuses a buffer only once the stream has written it, and only for a size it fits', async () => {
    const pool = new BufferPool(2, 0.25);
    const a = pool.take(100);
    expect(a.buffer.byteLength).toBe(125); // room for sizes that drift
    const sink = new PassThrough();
    let written = false;
    await writeFrame(sink, a, () => {
      written = true;
      pool.give(a);
    });
    sink.resume();
    await new Promise((r) => setImmediate(r));
    expect(written).toBe(true);
    expect(pool.take(110).buffer).toBe(a.buffer); // fits
    pool.give(a);
    expect(pool.take(40).buffer).not.toBe(a.buffer); // far too big to tie up for 40 bytes
    expect(pool.take(200).buffer).not.toBe(a.buffer); // too small
    // A buffer transferred to another thread is empty and never handed out again.
    const moved = pool.take(50);
    structuredClone(moved.buffer, { transfer: [moved.buffer as ArrayBuffer] });
    pool.give(moved);
    expect(pool.take(50).buffer.byteLength).toBeGreaterThan(0);
  });
});
