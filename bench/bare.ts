/**
 * The framework's ceiling for the status route: bare Fastify (no logger, no hooks, no database)
 * answering GET /api/v1/jobs/:uuid/status (and POST /api/v1/jobs/submit/:jobType) with a fixed
 * envelope of the same size as the service's.
 */
import Fastify from 'fastify';

const body: unknown = JSON.parse(process.env.BARE_BODY ?? '{"code":0,"message":"ok","data":{}}');
const app = Fastify({ logger: false });
app.get('/api/v1/jobs/:uuid/status', async () => body);
// The submit ceiling: Fastify's JSON body parsing, then a fixed answer of the service's size.
const submitted: unknown = JSON.parse(process.env.BARE_SUBMIT_BODY ?? '{"code":0,"message":"ok","data":{}}');
app.post('/api/v1/jobs/submit/:jobType', async () => submitted);
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
process.stderr.write(`BENCH_READY pid=${process.pid}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
