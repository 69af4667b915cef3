/**
 * The ceilings the service is compared with: bare Fastify (no logger, no hooks) answering
 * GET /api/v1/jobs/:uuid/status and POST /api/v1/jobs/submit/:jobType with fixed envelopes of
 * the service's size.
 *
 * BARE_DB makes the submit route durable: it parses the body and inserts one row per request
 * before answering, into SQLite (`sqlite:<file>`: WAL, synchronous=NORMAL, as the service opens
 * it; one prepared INSERT) or PostgreSQL (`postgres://…`: one INSERT through a pg pool of the
 * service's size), into a table with a primary key and a queue index. That is the physical
 * ceiling of a durable submit on this machine, without auth, validation or idempotency.
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';

const body: unknown = JSON.parse(process.env.BARE_BODY ?? '{"code":0,"message":"ok","data":{}}');
const submitted: unknown = JSON.parse(process.env.BARE_SUBMIT_BODY ?? '{"code":0,"message":"ok","data":{}}');

const TABLE = `CREATE TABLE IF NOT EXISTS bare_jobs (
  uuid TEXT PRIMARY KEY, owner TEXT NOT NULL, job_type TEXT NOT NULL, model TEXT NOT NULL,
  input TEXT NOT NULL, status TEXT NOT NULL, created_at BIGINT NOT NULL)`;
const QUEUE_INDEX = 'CREATE INDEX IF NOT EXISTS bare_jobs_queue ON bare_jobs (status, created_at)';

type Insert = (b: { job_type: string; model: string; input: unknown }) => Promise<void> | void;

async function durableInsert(url: string): Promise<Insert> {
  const row = (b: { job_type: string; model: string; input: unknown }) => [
    randomUUID(),
    'bench',
    b.job_type,
    b.model,
    JSON.stringify(b.input),
    'queued',
    Date.now(),
  ];
  if (url.startsWith('sqlite:')) {
    const { default: SQLite } = await import('better-sqlite3');
    const db = new SQLite(url.slice('sqlite:'.length));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec(TABLE);
    db.exec(QUEUE_INDEX);
    const insert = db.prepare('INSERT INTO bare_jobs VALUES (?, ?, ?, ?, ?, ?, ?)');
    return (b) => {
      insert.run(...row(b));
    };
  }
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  await pool.query(TABLE);
  await pool.query(QUEUE_INDEX);
  return async (b) => {
    await pool.query('INSERT INTO bare_jobs VALUES ($1, $2, $3, $4, $5, $6, $7)', row(b));
  };
}

const insert = process.env.BARE_DB ? await durableInsert(process.env.BARE_DB) : undefined;
const app = Fastify({ logger: false });
app.get('/api/v1/jobs/:uuid/status', async () => body);
app.post('/api/v1/jobs/submit/:jobType', async (request) => {
  if (insert) await insert(request.body as { job_type: string; model: string; input: unknown });
  return submitted;
});
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
process.stderr.write(`BENCH_READY pid=${process.pid}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
