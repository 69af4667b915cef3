import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defaultJobTypes } from '../../src/processors/catalogue.js';
import type { JobType } from '../../src/processors/types.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';

// Image jobs have no units to count (one picture), so each stage they report carries the percent
// of the whole job done when it starts: `progress` reads {stage, percent}, never percent null.

/** Gates the test opens one by one, so each stage can be read while the job sits in it. */
let gates: Array<() => void> = [];
const gate = () => new Promise<void>((resolve) => gates.push(resolve));
function openGate(): void {
  const g = gates;
  gates = [];
  for (const open of g) open();
}

function stagedJobType(): JobType {
  const options = z.strictObject({});
  return {
    name: 'test-staged',
    description: 'Test job type: two stages with declared percents, each held until the test opens it.',
    slots: {},
    models: [{ name: 'v1', description: 'the only model' }],
    options,
    stages: { thinking: 30, writing: 80 },
    async run(ctx) {
      ctx.progress('thinking');
      await gate();
      ctx.progress('writing');
      await gate();
      return { bytes: Buffer.from('{}'), contentType: 'application/json', extension: 'json' };
    },
  };
}

let svc: TestService;
let media: MediaServer;
beforeAll(async () => {
  media = await startMediaServer();
  const real = defaultJobTypes({ threads: 1 }).filter((t) => t.name === 'image-transform');
  svc = await startService({ WORKER_CONCURRENCY: '2' }, { jobTypes: [...real, stagedJobType()] });
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
});

const progressOf = async (uuid: string) =>
  (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data.progress as {
    stage: string;
    percent: number | null;
  } | null;

describe('progress by stage', () => {
  it("reads each stage's declared percent", async () => {
    const job = (
      await svc.call('POST', '/api/v1/jobs/submit/test-staged', {
        body: { job_type: 'test-staged', model: 'v1', input: {} },
      })
    ).body.data;
    expect(
      await waitFor(async () => (await progressOf(job.uuid))?.stage === 'thinking' && progressOf(job.uuid), 'thinking'),
    ).toEqual({
      stage: 'thinking',
      percent: 30,
    });
    await waitFor(() => gates.length > 0, 'the job to wait in its first stage');
    openGate();
    expect(
      await waitFor(async () => (await progressOf(job.uuid))?.stage === 'writing' && progressOf(job.uuid), 'writing'),
    ).toEqual({
      stage: 'writing',
      percent: 80,
    });
    await waitFor(() => gates.length > 0, 'the job to wait in its second stage');
    openGate();
    expect((await waitTerminal(svc.call, job.uuid)).status).toBe('completed');
  });

  it('image-transform: 0 % while downloading, then done', async () => {
    const job = (
      await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
        body: {
          job_type: 'image-transform',
          model: 'lanczos3',
          input: { source: media.url('/hold/photo.jpg'), width: 64 },
        },
      })
    ).body.data;
    const downloading = await waitFor(async () => {
      const p = await progressOf(job.uuid);
      return p?.stage === 'downloading media' && p;
    }, 'the download');
    expect(downloading).toEqual({ stage: 'downloading media', percent: 0 });
    const status = (await svc.call('GET', `/api/v1/jobs/${job.uuid}/status`)).body.data;
    expect(status.status_detail).toBe('downloading media (0%)');
    media.release();
    expect((await waitTerminal(svc.call, job.uuid)).status).toBe('completed');
  });

  it('the image job types declare a percent for every stage they report', () => {
    const types = new Map(defaultJobTypes({ threads: 1 }).map((t) => [t.name, t]));
    expect(types.get('image-transform')!.stages).toEqual({ 'downloading media': 0, 'transforming image': 40 });
    expect(Object.keys(types.get('image-face-swap')!.stages!)).toEqual([
      'downloading media',
      'detecting faces',
      'swapping faces',
      'encoding',
    ]);
    expect(Object.keys(types.get('face-detect')!.stages!)).toEqual(['downloading media', 'detecting faces']);
  });
});
