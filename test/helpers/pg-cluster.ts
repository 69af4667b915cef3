import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './service.js';

/**
 * A private PostgreSQL cluster for tests that stop and restart the database (never the machine's
 * shared server): initdb + pg_ctl from `pg_config --bindir`, run as the `postgres` user when this
 * process is root (PostgreSQL refuses to run as root), on its own port and temp directory.
 */
export interface PgCluster {
  url: string;
  port: number;
  start(): void;
  /** `pg_ctl restart -m fast`: every connection is terminated (57P01), then it comes back. */
  restart(): void;
  /** `pg_ctl stop -m immediate`: a crash stop; nothing answers until start(). */
  stopHard(): void;
  destroy(): void;
}

export function pgBinDir(): string | undefined {
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    return fs.existsSync(path.join(dir, 'initdb')) ? dir : undefined;
  } catch {
    return undefined;
  }
}

export async function startPgCluster(): Promise<PgCluster> {
  const bin = pgBinDir();
  if (!bin) throw new Error('PostgreSQL server binaries not found (pg_config --bindir)');
  const root = process.getuid?.() === 0;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mj-pgcluster-'));
  fs.chmodSync(dir, 0o777);
  const data = path.join(dir, 'data');
  const port = await freePort();
  const as = (cmd: string, args: string[]) => {
    const [file, argv] = root
      ? ['runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args]]
      : [path.join(bin, cmd), args];
    const r = spawnSync(file, argv, { encoding: 'utf8', cwd: dir });
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr || r.stdout}`);
  };
  as('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  const ctl = (...args: string[]) => as('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-w', '-t', '60', ...args]);
  const cluster: PgCluster = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start: () => ctl('-o', opts, 'start'),
    restart: () => ctl('-o', opts, '-m', 'fast', 'restart'),
    stopHard: () => ctl('-m', 'immediate', 'stop'),
    destroy: () => {
      try {
        ctl('-m', 'immediate', 'stop');
      } catch {
        /* already stopped */
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  cluster.start();
  return cluster;
}
