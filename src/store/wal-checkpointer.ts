import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * A SQLite file's WAL checkpoints, run by a worker thread on a connection of its own, so that the
 * checkpoint's writes and its two fsyncs (the WAL's before it, the database file's after it, at
 * `synchronous = NORMAL`) never hold the event loop. A connection that commits often (the webhook
 * dispatcher's) turns its own automatic checkpoint off and calls `committed(rows)` after each commit.
 * Its automatic checkpoint ran at the commit that took the WAL past 1,000 pages, synchronously:
 * 10–80 ms on this VM's disk every ~2,500 deliveries, the thread blocked (no attempt started, none
 * finished), and as long as the disk made the fsync wait.
 *
 * The checkpoints are PASSIVE: they copy what no reader still needs and never wait for a lock, so
 * neither side ever waits for the other; the next writer after a complete one starts the WAL
 * afresh. The other connections keep their automatic checkpoint (their commits are few); if the
 * worker fails, the caller gets `onFailure` and turns its own back on.
 */

/**
 * A checkpoint per this many rows written (a delivery writes two: its claim's lease and its
 * recording), about SQLite's own 1,000 pages. Asked for by time instead (every 100 ms) they were
 * 3–4 times as many at the bench's rates, each copying the same hot index pages again.
 */
export const CHECKPOINT_ROWS = 5_000;

/**
 * A WAL of more pages than this after a PASSIVE checkpoint (commits came during each one, so none
 * found the WAL wholly copied for the next writer to start it afresh) gets a RESTART checkpoint,
 * which holds the writers meanwhile: ~40 MiB of WAL at most.
 */
const RESTART_FRAMES = 10_000;

/** The worker's code (CommonJS, given better-sqlite3's resolved path: it runs wherever the service is installed). */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const SQLite = require(workerData.sqlite);
const db = new SQLite(workerData.file, { fileMustExist: true });
db.pragma('synchronous = ' + Number(workerData.synchronous));
db.pragma('busy_timeout = 0');
db.pragma('wal_autocheckpoint = 0');
parentPort.on('message', (m) => {
  if (m === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  const t0 = performance.now();
  let frames = 0;
  try {
    let [r] = db.pragma('wal_checkpoint(PASSIVE)');
    if (r && r.log > workerData.restartFrames) {
      // Commits during every checkpoint kept the WAL from starting afresh: this one waits for the
      // writers (up to a second) and starts it again.
      db.pragma('busy_timeout = 1000');
      [r] = db.pragma('wal_checkpoint(RESTART)');
      db.pragma('busy_timeout = 0');
    }
    frames = r ? r.log : 0;
  } catch {
    // Busy or failing this time: the next commit asks again.
  }
  parentPort.postMessage([frames, performance.now() - t0]);
});
`;

export class WalCheckpointer {
  private readonly worker: Worker;
  private running = false;
  /** Rows written since the last checkpoint was asked for; the first commit asks at once. */
  private rows = CHECKPOINT_ROWS;
  private closed = false;
  /**
   * What the thread has done so far (tests, benches): checkpoints, their time (ms) in all and the
   * longest, and the most frames the WAL held at one.
   */
  readonly done = { runs: 0, ms: 0, maxMs: 0, maxFrames: 0 };

  constructor(file: string, synchronous: number, onFailure: (err: unknown) => void) {
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { sqlite, file, synchronous, restartFrames: RESTART_FRAMES },
    });
    // Never what keeps a process up.
    this.worker.unref();
    this.worker.on('message', ([frames, ms]: [number, number]) => {
      this.running = false;
      this.done.runs++;
      this.done.ms += ms;
      this.done.maxMs = Math.max(this.done.maxMs, ms);
      this.done.maxFrames = Math.max(this.done.maxFrames, frames);
    });
    this.worker.on('error', (err) => {
      this.closed = true;
      onFailure(err);
    });
  }

  /** After a commit of `rows` rows: asks for a checkpoint once enough were written, unless one is running. */
  committed(rows: number): void {
    this.rows += rows;
    if (this.running || this.closed || this.rows < CHECKPOINT_ROWS) return;
    this.rows = 0;
    this.running = true;
    this.worker.postMessage('checkpoint');
  }

  /** Waits for the checkpoint in progress, if any (tests, benches). */
  async idle(): Promise<void> {
    while (this.running && !this.closed) await new Promise((r) => setTimeout(r, 5));
  }

  /** Ends the worker after the checkpoint in progress (its connection closed). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const exited = new Promise<void>((r) => this.worker.once('exit', () => r()));
    this.worker.postMessage('close');
    await exited;
  }
}
