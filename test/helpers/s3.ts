import { createRequire } from 'node:module';
import type { Server } from 'node:http';
import { tempDir } from './service.js';

const require = createRequire(import.meta.url);

export interface S3Server {
  endpoint: string;
  env: Record<string, string>;
  /** Stops the server (open connections cut): the storage is down until start(). */
  stop(): Promise<void>;
  /** Starts it again on the same port, with the same bucket and objects (running: nothing to do). */
  start(): Promise<void>;
  close(): Promise<void>;
}

interface S3rverInstance {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
  httpServer?: Server;
}

/** A real S3-compatible server (s3rver) on 127.0.0.1 with one bucket. */
export async function startS3(bucket = 'results'): Promise<S3Server> {
  const S3rver = require('s3rver') as new (opts: Record<string, unknown>) => S3rverInstance;
  const directory = tempDir('mj-s3-');
  let port = 0;
  let server: S3rverInstance | undefined;
  const start = async () => {
    if (server) return;
    server = new S3rver({ address: '127.0.0.1', port, silent: true, directory, configureBuckets: [{ name: bucket }] });
    port = (await server.run()).port;
  };
  const stop = async () => {
    const s = server;
    server = undefined;
    if (!s) return;
    // Keep-alive connections would otherwise go on being served by a "stopped" server.
    const closing = s.close();
    s.httpServer?.closeAllConnections();
    await closing;
  };
  await start();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    env: {
      RESULT_STORE: `s3://${bucket}/jobs`,
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
    },
    stop,
    start,
    close: stop,
  };
}
