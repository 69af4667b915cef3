import { parseArgs } from 'node:util';
import type { Logger } from 'pino';
import type { Role } from './app.js';
import { systemClock } from './clock.js';
import { ConfigError, loadConfig } from './config.js';
import { CLIENT_USAGE, isClientCommand } from './cli/client.js';
import { isDatabaseUnavailable } from './store/errors.js';

const USAGE = `usage:
  media-jobs serve [--role api|worker|all]   run the service (default: all in one process)
  media-jobs migrate                         apply database migrations and exit
  media-jobs keys create --owner NAME        create an API key (printed alone on the last line)
  media-jobs keys list                       list keys (never the keys themselves)
  media-jobs keys revoke KEY_ID              revoke a key
  media-jobs admin create-token              create an operator token for /dashboard and /admin/api (printed alone on the last line)
  media-jobs workers create-token --name NAME [--job-types a,b]
                                             create a remote worker token (mjw_…, printed alone on the last line)
  media-jobs workers list                    list worker tokens (never the tokens themselves)
  media-jobs workers revoke WORKER_ID        revoke a worker token
  media-jobs worker --job-type NAME -- COMMAND [ARG…]
                                             a remote worker: runs COMMAND per job (media-jobs worker --help)`;

/**
 * The last line of defence. A database connection error that escaped its handler (a driver event,
 * a promise nobody awaited) is logged and survived: the pool replaces the connection and every
 * loop retries. Anything else is a bug that leaves the process in an unknown state: log it and
 * exit 1 (Node's own policy, but through the structured log), and let the supervisor restart
 * us; leased jobs are picked up again when their lease lapses.
 */
function guardProcess(log: Logger): void {
  const onFault = (origin: 'uncaughtException' | 'unhandledRejection') => (err: unknown) => {
    if (isDatabaseUnavailable(err)) {
      log.warn({ err, origin }, 'database connection error outside any handler; continuing');
      return;
    }
    log.fatal({ err, origin }, 'unexpected error; exiting');
    process.exit(1);
  };
  process.on('uncaughtException', onFault('uncaughtException'));
  process.on('unhandledRejection', onFault('unhandledRejection'));
}

/** What the start-up line says this process serves: the API, or (a worker) only the operations routes. */
function servedUrls(role: Role, base: string): Record<string, string | string[]> {
  if (role !== 'worker') return { url: `${base}/api/v1` };
  return { serves: ['/healthz', '/readyz', '/metrics'].map((p) => `${base}${p}`) };
}

async function serve(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { role: { type: 'string', default: 'all' } } });
  const role = values.role as Role;
  if (!['api', 'worker', 'all'].includes(role))
    throw new ConfigError(`--role must be api, worker or all (got "${role}")`);
  const config = loadConfig();
  // Loaded on demand so client commands (submit, status, …) start fast.
  const { createApp } = await import('./app.js');
  const { countKeys, createKey } = await import('./store/keys.js');
  const app = await createApp(config, { role });
  guardProcess(app.log);
  // Only a process that serves the API creates and shows the first key: a worker's terminal is
  // one nobody watches, and it takes no API calls.
  if (role !== 'worker' && (await countKeys(app.store.db)) === 0) {
    const k = await createKey(app.store.db, 'default', systemClock.now());
    process.stdout.write(
      `\nNo API key existed, so one was created for owner "default" (id ${k.id}).\n` +
        `It is shown only this once; use it as "Authorization: Bearer <key>":\n${k.key}\n\n`,
    );
  }
  try {
    await app.start();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    await app.stop(0).catch(() => {});
    throw new ConfigError(
      `${config.host}:${config.port} is already in use: every process listens on its PORT (a worker-only one for /healthz, /readyz and /metrics), so give each process on one machine its own PORT`,
    );
  }
  app.log.info(
    { role, ...servedUrls(role, config.publicBaseUrl), workers: app.workers ? config.workerConcurrency : 0 },
    'media-jobs started',
  );
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    // Last resort: never hang on shutdown. Leased jobs are recovered by lease expiry anyway.
    setTimeout(() => {
      app.log.error({ pending: app.pendingShutdownPhases() }, 'shutdown took too long; exiting');
      process.exit(1);
    }, config.shutdownGraceMs + 15_000).unref();
    app.stop(config.shutdownGraceMs).then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

async function keys(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  const config = loadConfig();
  const { openStore } = await import('./store/db.js');
  const { createKey, listKeys, revokeKey } = await import('./store/keys.js');
  const store = await openStore(config.databaseUrl, { poolSize: config.databasePoolSize });
  try {
    if (sub === 'create') {
      const { values } = parseArgs({ args: rest, options: { owner: { type: 'string' } } });
      const owner = values.owner?.trim();
      if (!owner || owner.length > 200) throw new ConfigError('keys create needs --owner NAME (1 to 200 characters)');
      const k = await createKey(store.db, owner, systemClock.now());
      process.stdout.write(`created key ${k.id} for owner "${k.owner}"; it is shown only this once:\n${k.key}\n`);
    } else if (sub === 'list') {
      const rows = await listKeys(store.db);
      if (rows.length === 0) process.stdout.write('no keys\n');
      for (const r of rows) {
        const state = r.revoked_at ? `revoked ${new Date(r.revoked_at).toISOString()}` : 'active';
        process.stdout.write(`${r.id}\t${r.prefix}…\t${r.owner}\t${new Date(r.created_at).toISOString()}\t${state}\n`);
      }
    } else if (sub === 'revoke') {
      const id = rest[0];
      if (!id) throw new ConfigError('keys revoke needs a KEY_ID (see keys list)');
      if (!(await revokeKey(store.db, id, systemClock.now()))) throw new ConfigError(`no active key with id ${id}`);
      process.stdout.write(`revoked ${id}\n`);
    } else {
      throw new ConfigError(USAGE);
    }
  } finally {
    await store.close();
  }
}

async function admin(args: string[]): Promise<void> {
  const [sub] = args;
  if (sub !== 'create-token') throw new ConfigError(USAGE);
  const config = loadConfig();
  const { openStore } = await import('./store/db.js');
  const { createAdminToken } = await import('./store/admin-tokens.js');
  const store = await openStore(config.databaseUrl, { poolSize: config.databasePoolSize });
  try {
    const t = await createAdminToken(store.db, systemClock.now());
    process.stdout.write(
      `created admin token ${t.id}; it is shown only this once (the dashboard's operator view takes it):\n${t.token}\n`,
    );
  } finally {
    await store.close();
  }
}

async function workers(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  const config = loadConfig();
  const { openStore } = await import('./store/db.js');
  const { createWorkerToken, listWorkerTokens, revokeWorkerToken } = await import('./store/worker-tokens.js');
  const store = await openStore(config.databaseUrl, { poolSize: config.databasePoolSize });
  try {
    if (sub === 'create-token') {
      const { values } = parseArgs({
        args: rest,
        options: { name: { type: 'string' }, 'job-types': { type: 'string' } },
      });
      const name = values.name?.trim();
      if (!name || name.length > 200)
        throw new ConfigError('workers create-token needs --name NAME (1 to 200 characters)');
      const types = values['job-types']
        ?.split(',')
        .map((t) => t.trim())
        .filter(Boolean);
      if (types !== undefined && types.length === 0)
        throw new ConfigError('--job-types needs at least one job type name (a,b)');
      if (types && config.remote.jobTypesFile) {
        // Catch a typo now rather than as a 403 on the worker's first claim.
        const { loadDeclaredTypes } = await import('./remote/declared-types.js');
        const declared = loadDeclaredTypes(config.remote.jobTypesFile).map((t) => t.name);
        const unknown = types.filter((t) => !declared.includes(t));
        if (unknown.length > 0)
          throw new ConfigError(
            `not declared in JOB_TYPES_FILE: ${unknown.join(', ')} (declared: ${declared.join(', ')})`,
          );
      }
      const t = await createWorkerToken(store.db, { name, jobTypes: types ?? null }, systemClock.now());
      process.stdout.write(
        `created worker token ${t.id} "${name}" for ${types ? types.join(', ') : 'every declared remote job type'}; it is shown only this once:\n${t.token}\n`,
      );
    } else if (sub === 'list') {
      const rows = await listWorkerTokens(store.db);
      if (rows.length === 0) process.stdout.write('no worker tokens\n');
      const iso = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());
      for (const r of rows) {
        const state = r.revoked_at ? `revoked ${iso(r.revoked_at)}` : 'active';
        process.stdout.write(
          `${r.id}\t${r.prefix}…\t${r.name}\t${r.job_types.length ? r.job_types.join(',') : '*'}\tcreated ${iso(r.created_at)}\tlast seen ${iso(r.last_seen_at)}\t${state}\n`,
        );
      }
    } else if (sub === 'revoke') {
      const id = rest[0];
      if (!id) throw new ConfigError('workers revoke needs a WORKER_ID (see workers list)');
      if (!(await revokeWorkerToken(store.db, id, systemClock.now())))
        throw new ConfigError(`no active worker token with id ${id}`);
      process.stdout.write(`revoked ${id}\n`);
    } else {
      throw new ConfigError(USAGE);
    }
  } finally {
    await store.close();
  }
}

async function migrate(): Promise<void> {
  const config = loadConfig();
  const { openStore } = await import('./store/db.js');
  const store = await openStore(config.databaseUrl, { poolSize: config.databasePoolSize });
  await store.close();
  process.stdout.write('migrations applied\n');
}

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  if (cmd && isClientCommand(cmd)) {
    const { runClientCommand } = await import('./cli/client.js');
    process.exitCode = await runClientCommand(argv);
    return;
  }
  switch (cmd ?? 'serve') {
    case 'serve':
      return serve(rest);
    case 'keys':
      return keys(rest);
    case 'admin':
      return admin(rest);
    case 'workers':
      return workers(rest);
    case 'worker': {
      const { runWorkerCommand, WORKER_USAGE } = await import('./cli/worker.js');
      if (rest[0] === '--help' || rest[0] === '-h') {
        process.stdout.write(`${WORKER_USAGE}\n`);
        return;
      }
      process.exitCode = await runWorkerCommand(rest);
      return;
    }
    case 'migrate':
      return migrate();
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n\n${CLIENT_USAGE}\n`);
      return;
    default:
      throw new ConfigError(`unknown command "${cmd}"\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // Bad configuration or usage: one clear line, no stack trace.
  if (err instanceof ConfigError) process.stderr.write(`media-jobs: ${err.message}\n`);
  else process.stderr.write(`media-jobs: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
