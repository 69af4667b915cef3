/** Raw video frames over pipes: fixed-size rgb24 frames in, and out with backpressure. */
import type { Readable, Writable } from 'node:stream';

/**
 * Byte buffers handed back once their contents are no longer needed, for frames and face regions.
 * A 720p frame is 2.7 MB, and each fresh ArrayBuffer counts towards V8's heap limits: allocating
 * one or two per frame made the main thread run a full collection every few frames.
 */
export class BufferPool {
  private readonly free: ArrayBuffer[] = [];
  /** `keep`: most buffers held; `slack`: room allocated beyond the size asked, for sizes that drift. */
  constructor(
    private readonly keep: number,
    private readonly slack = 0,
  ) {}

  /** A view of `n` bytes at the start of a free buffer no more than twice that size, else of a new one. Contents undefined. */
  take(n: number): Uint8Array {
    const i = this.free.findIndex((b) => b.byteLength >= n && b.byteLength <= 2 * n);
    const buf = i >= 0 ? this.free.splice(i, 1)[0]! : new ArrayBuffer(Math.ceil(n * (1 + this.slack)));
    return new Uint8Array(buf, 0, n);
  }

  /** Gives a view's buffer back (a buffer transferred away, hence empty, is dropped). */
  give(view: Uint8Array): void {
    if (this.free.length < this.keep && view.buffer.byteLength > 0 && !this.free.includes(view.buffer as ArrayBuffer)) {
      this.free.push(view.buffer as ArrayBuffer);
    }
  }
}

/**
 * Splits a rawvideo stream into frames of exactly `frameBytes`, each in its own ArrayBuffer (so it
 * can be transferred to a worker thread without a copy), taken from `pool` when given. A trailing
 * partial frame is dropped.
 */
export async function* readFrames(stream: Readable, frameBytes: number, pool?: BufferPool): AsyncGenerator<Uint8Array> {
  const fresh = () => (pool ? pool.take(frameBytes) : new Uint8Array(frameBytes));
  let frame = fresh();
  let filled = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    let off = 0;
    while (off < chunk.length) {
      const n = Math.min(frameBytes - filled, chunk.length - off);
      frame.set(chunk.subarray(off, off + n), filled);
      filled += n;
      off += n;
      if (filled === frameBytes) {
        yield frame;
        frame = fresh();
        filled = 0;
      }
    }
  }
}

/**
 * Writes one chunk, waiting for 'drain' when the pipe is full (or failing if the process died).
 * `written` is called once the stream no longer needs `data` (its buffer may then be reused).
 */
export async function writeFrame(stream: Writable, data: Uint8Array, written?: () => void): Promise<void> {
  if (stream.destroyed || stream.writableEnded) throw new Error('encoder input closed');
  if (stream.write(data, written && ((err) => !err && written()))) return;
  await new Promise<void>((resolve, reject) => {
    const done = (err?: Error) => {
      stream.off('drain', onDrain);
      stream.off('close', onClose);
      if (err) reject(err);
      else resolve();
    };
    const onDrain = () => done();
    const onClose = () => done(new Error('encoder input closed'));
    stream.on('drain', onDrain);
    stream.on('close', onClose);
  });
}
