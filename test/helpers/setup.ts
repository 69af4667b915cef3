import { dropTestDatabases } from './db.js';

/** Runs in each test worker: drop the databases this worker created. */
import { afterAll } from 'vitest';
afterAll(async () => {
  await dropTestDatabases();
});
