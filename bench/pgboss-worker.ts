/**
 * The pg-boss reference worker: one process, `PGBOSS_LOOPS` work() loops on queue `bench`, each
 * fetching up to `PGBOSS_BATCH` jobs per poll (pg-boss 10 polls; 0.5 s is its shortest interval),
 * with a no-op handler. Jobs are sent by the parent (bench/scenarios/queue.ts).
 */
import PgBoss from 'pg-boss';

const boss = new PgBoss({
  connectionString: process.env.DATABASE_URL!,
  max: Number(process.env.PGBOSS_POOL ?? 10),
  supervise: false,
  schedule: false,
  migrate: false,
});
boss.on('error', (err: Error) => process.stderr.write(`pg-boss error: ${err.message}\n`));
await boss.start();
const loops = Number(process.env.PGBOSS_LOOPS ?? 1);
for (let i = 0; i < loops; i++) {
  await boss.work(
    'bench',
    { batchSize: Number(process.env.PGBOSS_BATCH ?? 8), pollingIntervalSeconds: 0.5 },
    async () => {},
  );
}
process.stderr.write(`BENCH_READY pid=${process.pid}\n`);
process.on('SIGTERM', () => {
  boss.stop({ graceful: true, wait: true, timeout: 5_000 }).then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
