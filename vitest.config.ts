import { defineConfig } from 'vitest/config';
import { ADMIN_URL, postgresReachable } from './test/helpers/pg-admin.js';

// The integration suite runs twice: on SQLite (embedded) and on PostgreSQL (scale-out).
// Without a PostgreSQL server a developer gets one clear line and the SQLite run; CI sets
// REQUIRE_POSTGRES=true so a missing server fails loudly instead.
const integration = [
  'test/api/**/*.test.ts',
  'test/webhooks/**/*.test.ts',
  'test/scale/**/*.test.ts',
  'test/remote/**/*.test.ts',
];
// Test services do not warm the face and video types at start (models loaded by each of hundreds of
// services); the tests of the warm-up turn it on themselves.
const quiet = { WORKER_WARMUP: 'false' };
const common = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  setupFiles: ['test/helpers/setup.ts'],
};

export default defineConfig(async () => {
  const pgUp = await postgresReachable();
  if (!pgUp) {
    if (process.env.REQUIRE_POSTGRES === 'true')
      throw new Error(`PostgreSQL is required (REQUIRE_POSTGRES=true) but ${ADMIN_URL} is not reachable`);
    console.log(
      `PostgreSQL not reachable at ${ADMIN_URL}: skipping the PostgreSQL run of the integration suite (set TEST_PG_URL to point at one).`,
    );
  }
  return {
    test: {
      pool: 'forks',
      maxWorkers: 2,
      projects: [
        {
          test: {
            ...common,
            name: 'sqlite',
            include: ['test/**/*.test.ts'],
            exclude: ['test/scale/**', 'node_modules/**'],
            env: { TEST_DB: 'sqlite', ...quiet },
          },
        },
        ...(pgUp
          ? [
              {
                test: {
                  ...common,
                  name: 'postgres',
                  include: integration,
                  env: { TEST_DB: 'postgres', TEST_PG_URL: ADMIN_URL, ...quiet },
                },
              },
            ]
          : []),
      ],
    },
  };
});
