/**
 * Scenario 5: does CPU-heavy work leave the API responsive? Status p50/p99 of a completed job at a
 * steady BENCH_ISOLATION_RATE (200 req/s over 8 connections), once on an idle service and once
 * while every worker slot (WORKER_CONCURRENCY: its default, CPU count capped at 4) runs
 * image-transform jobs: a 6000x4000 JPEG, generated once with sharp and served by a local media
 * server, resized to 3000 px wide WebP. SQLite, role all (the embedded deployment).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import sharp from 'sharp';
import {
  authHeaders,
  checkLoad,
  describeLoad,
  fmt,
  freePort,
  freshStore,
  httpClient,
  load,
  log,
  median,
  note,
  NOOP_BODY,
  NOOP_PATH,
  raw,
  settings,
  setScenario,
  spawnChild,
  startService,
  stopAll,
  waitUntil,
  type Child,
  type LoadResult,
  type Row,
} from '../lib.js';

const RATE = Number(process.env.BENCH_ISOLATION_RATE ?? 200);
const CONNECTIONS = 8;
const TARGET_P99_MS = 50;
const SLOTS = Math.max(1, Math.min(4, os.availableParallelism()));

/** A 6000x4000 JPEG with texture (noise, upscaled: quick to make, real work to resize and encode). */
async function bigImage(): Promise<string> {
  const file = path.join(os.tmpdir(), 'mj-bench-6000x4000.jpg');
  if (!fs.existsSync(file)) {
    const small = await sharp({
      create: {
        width: 600,
        height: 400,
        channels: 3,
        background: '#808080',
        noise: { type: 'gaussian', mean: 128, sigma: 60 },
      },
    })
      .png()
      .toBuffer();
    await sharp(small).resize(6000, 4000, { kernel: 'cubic' }).jpeg({ quality: 90 }).toFile(`${file}.tmp`);
    fs.renameSync(`${file}.tmp`, file);
  }
  return file;
}

export async function isolationScenario(): Promise<Row[]> {
  setScenario('isolation');
  const image = await bigImage();
  const mediaPort = await freePort();
  const store = await freshStore('sqlite');
  let media: Child | undefined;
  let svc: Child | undefined;
  const db = () => new SQLite(path.join(store.dataDir, 'media-jobs.sqlite'), { readonly: true });
  const count = (status: string) => {
    const d = db();
    try {
      return (
        d.prepare("SELECT count(*) AS n FROM jobs WHERE status = ? AND job_type = 'image-transform'").get(status) as {
          n: number;
        }
      ).n;
    } finally {
      d.close();
    }
  };
  try {
    media = await spawnChild('media-server', 'helper-server.ts', [], { PORT: String(mediaPort), MEDIA_FILE: image });
    const service = await startService(store, { role: 'all' });
    svc = service;
    const c = httpClient(service.base, store.key, 8);
    const uuid = (await c.call('POST', NOOP_PATH, NOOP_BODY)).json.data.uuid as string;
    const statusPath = `/api/v1/jobs/${uuid}/status`;
    await waitUntil(
      'the no-op job to complete',
      async () => (await c.call('GET', statusPath)).json.data?.status === 'completed',
    );
    const heavyBody = JSON.stringify({
      job_type: 'image-transform',
      model: 'lanczos3',
      input: { source: `http://127.0.0.1:${mediaPort}/media/big.jpg`, width: 3000, format: 'webp' },
    });
    const url = `${service.base}${statusPath}`;
    const headers = authHeaders(store.key);
    const measure = () => load({ url, headers, connections: CONNECTIONS, overallRate: RATE });
    await load({ url, headers, connections: CONNECTIONS, overallRate: RATE, duration: 2 });

    const idle: LoadResult[] = [];
    const busy: LoadResult[] = [];
    let jobsDone = 0;
    for (let i = 0; i < settings.rounds; i++) {
      const r0 = await measure();
      checkLoad('isolation idle', r0);
      idle.push(r0);
      log(`  round ${i + 1} idle: ${describeLoad(r0)}`);

      // Enough jobs to keep every slot busy past the end of the measurement (one takes ≥ 0.5 s
      // here); the rest are cancelled afterwards.
      const jobs = SLOTS * Math.ceil(2 * settings.duration + 6);
      const ids: string[] = [];
      for (let j = 0; j < jobs; j++)
        ids.push((await c.call('POST', '/api/v1/jobs/submit/image-transform', heavyBody)).json.data.uuid as string);
      await waitUntil('every slot to be busy', () => count('processing') >= SLOTS, 30_000, 50);
      await sleep(500); // past the download, into the resize
      const completedBefore = count('completed');
      const r1 = await measure();
      const queuedAfter = count('queued');
      const processingAfter = count('processing');
      jobsDone += count('completed') - completedBefore;
      checkLoad('isolation busy', r1);
      if (processingAfter < SLOTS || queuedAfter === 0)
        note(
          `isolation round ${i + 1}: slots ran dry (${processingAfter} processing, ${queuedAfter} queued at the end)`,
        );
      busy.push(r1);
      log(
        `  round ${i + 1} ${SLOTS} slots busy: ${describeLoad(r1)} (${processingAfter} processing, ${queuedAfter} queued at the end)`,
      );
      // Drop the rest; libvips finishes what it started, so give it time before the next idle run.
      await Promise.all(ids.map((id) => c.call('POST', `/api/v1/jobs/${id}/cancel`)));
      await sleep(5_000);
    }
    await c.close();
    raw.isolation = {
      rate: RATE,
      connections: CONNECTIONS,
      slots: SLOTS,
      idle,
      busy,
      heavyJobsCompletedDuringMeasurement: jobsDone,
    };
    const m = (rs: LoadResult[]) => ({
      p50: median(rs.map((r) => r.p50)),
      p99: median(rs.map((r) => r.p99)),
      rps: median(rs.map((r) => r.rps)),
    });
    const b = m(busy);
    const z = m(idle);
    const perRound = jobsDone / settings.rounds;
    return [
      {
        scenario: '5 isolation',
        case: `SQLite, status at ${RATE} req/s while ${SLOTS} slots resize 6000x4000 JPEG → 3000 px WebP (~${perRound.toFixed(0)} done per ${settings.duration} s)`,
        value: `p50 ${fmt.ms(b.p50)}, p99 ${fmt.ms(b.p99)} (${fmt.int(b.rps)} req/s)`,
        reference: `idle service: p50 ${fmt.ms(z.p50)}, p99 ${fmt.ms(z.p99)}`,
        target: `p99 < ${TARGET_P99_MS} ms`,
        ok: b.p99 < TARGET_P99_MS,
      },
    ];
  } finally {
    await stopAll([svc, media]);
    await store.dispose();
  }
}
