import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobType } from '../../src/processors/types.js';
import { signResultPath } from '../../src/storage/signing.js';
import { sharedSecret } from '../../src/store/settings.js';
import { startService, tempDir, waitFor, waitTerminal, type TestService } from '../helpers/service.js';

/**
 * The local results disk full, for real: DATA_DIR/results is a 256 KiB tmpfs (mounting needs root;
 * elsewhere this file is skipped with one line), filled up to its last 64 KiB. A 200 KiB result
 * then fails its job with a message that says why, and nothing of the half-written file is left
 * or served. Filled to the last byte, /readyz says the storage is full; the process keeps serving
 * throughout, and once there is room again jobs complete and their results download whole. The
 * SQLite file is on the ordinary disk.
 */
const DISK = 256 * 1024;
const RESULT_BYTES = 200 * 1024;

const canMount = process.platform === 'linux' && process.getuid?.() === 0;
if (!canMount) console.log('results disk full: skipped (mounting a tmpfs needs root on Linux)');

/** A test job type whose result is `bytes` bytes of a known pattern. */
function blobJobType(): JobType {
  const options = z.strictObject({
    bytes: z
      .int()
      .min(1)
      .max(4 * 1024 * 1024),
  });
  const t: JobType<typeof options> = {
    name: 'test-blob',
    description: 'Test job type: a result of `bytes` bytes.',
    slots: {},
    models: [{ name: 'v1', description: 'the only model' }],
    options,
    run: (ctx) =>
      Promise.resolve({
        bytes: pattern(ctx.options.bytes),
        contentType: 'application/octet-stream',
        extension: 'bin',
      }),
  };
  return t;
}
const pattern = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => i % 251));

describe.skipIf(!canMount)('the local results disk full', () => {
  const dataDir = tempDir('mj-disk-full-');
  const resultsDir = path.join(dataDir, 'results');
  let mounted = false;
  let svc: TestService;
  beforeAll(async () => {
    fs.mkdirSync(resultsDir);
    const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${DISK}`, 'tmpfs', resultsDir], { encoding: 'utf8' });
    expect(mount.status, `mount: ${mount.stderr}`).toBe(0);
    mounted = true;
    svc = await startService({ WORKER_CONCURRENCY: '1' }, { dataDir, jobTypes: [blobJobType()] });
  });
  afterAll(async () => {
    await svc?.stop();
    if (mounted) spawnSync('umount', ['-l', resultsDir], { stdio: 'ignore' });
  });

  const submit = async (bytes: number): Promise<string> => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/test-blob', {
      body: { job_type: 'test-blob', model: 'v1', input: { bytes } },
    });
    expect(r.status, r.text).toBe(200);
    return r.body.data.uuid as string;
  };
  const readyz = () => svc.call('GET', '/readyz', { key: null });

  it('fails the job clearly, serves no half-written result, stays up, and recovers when there is room', async () => {
    const filler = path.join(resultsDir, 'filler');
    const { bavail, bsize } = fs.statfsSync(resultsDir);
    fs.writeFileSync(filler, Buffer.alloc(bavail * bsize - 64 * 1024));
    expect(fs.statfsSync(resultsDir).bavail * bsize).toBeLessThan(RESULT_BYTES);

    const uuid = await submit(RESULT_BYTES);
    const failed = await waitTerminal(svc.call, uuid);
    expect(failed).toMatchObject({
      status: 'failed',
      error_type: 'internal_error',
      error_message: 'the result could not be stored: the results disk is full',
      result_ready: false,
    });
    // Nothing of it is left on the disk (no temporary file either), and nothing is served.
    expect(fs.readdirSync(resultsDir)).toEqual(['filler']);
    expect((await svc.call('GET', `/api/v1/jobs/${uuid}/result`)).status).toBe(409);
    // Even a correctly signed URL for its key finds nothing.
    const key = `${uuid}.1.bin`;
    const expires = Math.floor(Date.now() / 1000) + 600;
    const signature = signResultPath(await sharedSecret(svc.app.store.db, 'result_url_secret'), key, expires);
    expect((await fetch(`${svc.base}/results/${key}?expires=${expires}&signature=${signature}`)).status).toBe(410);

    // Now full to the last byte: even a small result fails, and /readyz (whose probe writes one
    // byte: 64 KiB free was room for small results) says why.
    try {
      fs.writeFileSync(
        path.join(resultsDir, 'filler-2'),
        Buffer.alloc(fs.statfsSync(resultsDir).bavail * bsize + bsize),
      );
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC');
    }
    const small = await waitTerminal(svc.call, await submit(1024));
    expect(small).toMatchObject({ status: 'failed', error_type: 'internal_error' });
    const notReady = await readyz();
    expect(notReady.status).toBe(503);
    expect(notReady.body).toMatchObject({ code: -1, data: {} });
    expect(notReady.body.message).toBe('result storage is full (no space left on the results disk)');

    // The process keeps serving: the API answers and takes new jobs.
    expect((await svc.call('GET', '/healthz', { key: null })).status).toBe(200);
    expect((await svc.call('GET', '/api/v1/jobs')).status).toBe(200);

    fs.rmSync(filler);
    fs.rmSync(path.join(resultsDir, 'filler-2'));
    await waitFor(async () => (await readyz()).status === 200, '/readyz to be ready once there is room');
    const ok = await submit(RESULT_BYTES);
    expect((await waitTerminal(svc.call, ok)).status).toBe('completed');
    const result = (await svc.call('GET', `/api/v1/jobs/${ok}/result`)).body.data;
    expect(result.size_bytes).toBe(RESULT_BYTES);
    const download = await fetch(result.url);
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).equals(pattern(RESULT_BYTES))).toBe(true);
    expect(fs.readdirSync(resultsDir)).toEqual([`${ok}.1.bin`]);
  });
});
