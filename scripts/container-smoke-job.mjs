#!/usr/bin/env node
/* global process, console, fetch, setTimeout, Buffer -- a Node script */
// One real job through a running container's public API, for scripts/container-smoke.sh:
//   node scripts/container-smoke-job.mjs API_URL API_KEY MEDIA_URL [PROBE_URL…]
// Waits until API_URL's and every PROBE_URL's /readyz answer 200, submits an image-transform of
// MEDIA_URL, waits for it to complete, downloads the signed result and checks it is the WebP asked for.
const [apiUrl, apiKey, mediaUrl, ...probes] = process.argv.slice(2);
if (!apiUrl || !apiKey || !mediaUrl) {
  console.error('usage: container-smoke-job.mjs API_URL API_KEY MEDIA_URL [PROBE_URL…]');
  process.exit(2);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const auth = { authorization: `Bearer ${apiKey}` };

async function until(what, check, deadlineMs) {
  const deadline = Date.now() + deadlineMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
      last = 'not yet';
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await sleep(250);
  }
  throw new Error(`${what}: gave up after ${deadlineMs / 1000} s (${last})`);
}

async function api(method, path, body) {
  const res = await fetch(`${apiUrl}/api/v1${path}`, {
    method,
    headers: body ? { ...auth, 'content-type': 'application/json' } : auth,
    body: body ? JSON.stringify(body) : undefined,
  });
  const envelope = await res.json();
  if (envelope.code !== 0) throw new Error(`${method} ${path}: HTTP ${res.status} ${envelope.message}`);
  return envelope.data;
}

for (const base of [apiUrl, ...probes]) {
  await until(`${base}/readyz`, async () => (await fetch(`${base}/readyz`)).status === 200, 120_000);
}
const job = await api('POST', '/jobs/submit/image-transform', {
  job_type: 'image-transform',
  model: 'lanczos3',
  input: { source: mediaUrl, width: 64, format: 'webp' },
});
const done = await until(
  `job ${job.uuid}`,
  async () => {
    const status = await api('GET', `/jobs/${job.uuid}/status?wait=10`);
    if (status.status === 'failed' || status.status === 'cancelled') {
      console.error(`container-smoke-job: job ${status.status}: ${status.error_type}: ${status.error_message}`);
      process.exit(1);
    }
    return status.status === 'completed' ? status : undefined;
  },
  180_000,
);
const result = await api('GET', `/jobs/${done.uuid}/result`);
const blob = Buffer.from(await (await fetch(result.url)).arrayBuffer());
const isWebp = blob.subarray(0, 4).toString() === 'RIFF' && blob.subarray(8, 12).toString() === 'WEBP';
if (!isWebp || blob.length !== result.size_bytes) {
  console.error(`container-smoke-job: the result is not the ${result.size_bytes}-byte WebP announced`);
  process.exit(1);
}
console.log(`job ${done.uuid} completed; result ${result.content_type}, ${blob.length} bytes`);
