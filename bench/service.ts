/**
 * The service under benchmark, as a child process: `media-jobs serve` with the default job types
 * plus the benchmark-only `bench-noop` type; configuration from the environment, as in production.
 *
 *   node --import tsx bench/service.ts --role api|worker|all
 */
import { parseArgs } from 'node:util';
import { createApp, type Role } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { defaultJobTypes } from '../src/processors/catalogue.js';
import { noopJobType } from './noop.js';

const { values } = parseArgs({ options: { role: { type: 'string', default: 'all' } } });
const role = values.role as Role;
const config = loadConfig();
const app = await createApp(config, {
  role,
  jobTypes: [...defaultJobTypes({ threads: Math.max(1, config.workerConcurrency) }), noopJobType()],
});
await app.start();
process.stderr.write(`BENCH_READY pid=${process.pid} role=${role}\n`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  // process.exit (not a signal death) so --cpu-prof can write its profile.
  app.stop(config.shutdownGraceMs).then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
