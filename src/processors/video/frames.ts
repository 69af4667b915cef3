/** Raw video frames over pipes: fixed-size rgb24 frames in, and out with backpressure. */
import type { Readable, Writable } from 'node:stream';

/**
 * Splits a rawvideo stream into frames of exactly `frameBytes`, each in its own ArrayBuffer (so it
 * can be transferred to a worker thread without a copy). A trailing partial frame is dropped.
 */
export async function* readFrames(stream: Readable, frameBytes: number): AsyncGenerator<Uint8Array> {
  let frame = new Uint8Array(frameBytes);
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
        frame = new Uint8Array(frameBytes);
        filled = 0;
      }
    }
  }
}

/** Writes one chunk, waiting for 'drain' when the pipe is full (or failing if the process died). */
export async function writeFrame(stream: Writable, data: Uint8Array): Promise<void> {
  if (stream.destroyed || stream.writableEnded) throw new Error('encoder input closed');
  if (stream.write(data)) return;
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
