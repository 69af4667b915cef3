import type { Socket } from 'node:net';

/** How long, and how many bytes, a connection answered early may still be read and discarded. */
export const LINGER_MS = 5_000;
export const LINGER_BYTES = 64 * 1024 * 1024;
const CHECK_MS = 100;

const lingering = new WeakSet<Socket>();

/**
 * A lingering close (nginx's `lingering_close`) for a request answered before its body was read
 * (413, a bad JSON body …). Fastify answers these with `Connection: close`, and Node then closes
 * the socket at once; closing a socket with unread bytes makes the kernel send a reset, which can
 * destroy the answer before the client, still sending, has read it (EPIPE, no 413). Here the close
 * becomes: flush the answer, send FIN, keep reading and discarding what the client still sends
 * (Node's HTTP parser goes on consuming the body) until the client closes its side, LINGER_BYTES
 * more were read or LINGER_MS passed; then close. Bounded per connection in time and bytes.
 */
export function lingerOnClose(socket: Socket): void {
  if (lingering.has(socket) || socket.destroyed) return;
  lingering.add(socket);
  // Node's HTTP server calls destroySoon() once the answer is written (res._last).
  socket.destroySoon = function lingeringClose(this: Socket) {
    const startBytes = this.bytesRead;
    const until = performance.now() + LINGER_MS;
    const check = setInterval(() => {
      if (performance.now() > until || this.bytesRead - startBytes > LINGER_BYTES) done();
    }, CHECK_MS);
    check.unref();
    const done = () => {
      clearInterval(check);
      this.destroy();
    };
    this.once('end', done);
    this.once('error', done);
    this.once('close', () => clearInterval(check));
    this.end(); // after the answer, then FIN
    this.resume();
  };
}
