import { createRequire } from 'node:module';
import { tempDir } from './service.js';

const require = createRequire(import.meta.url);

export interface S3Server {
  endpoint: string;
  env: Record<string, string>;
  close(): Promise<void>;
}

/** A real S3-compatible server (s3rver) on 127.0.0.1 with one bucket. */
export async function startS3(bucket = 'results'): Promise<S3Server> {
  const S3rver = require('s3rver');
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: tempDir('mj-s3-'),
    configureBuckets: [{ name: bucket }],
  });
  const addr = (await server.run()) as { port: number };
  const endpoint = `http://127.0.0.1:${addr.port}`;
  return {
    endpoint,
    env: {
      RESULT_STORE: `s3://${bucket}/jobs`,
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
    },
    close: () => server.close(),
  };
}
