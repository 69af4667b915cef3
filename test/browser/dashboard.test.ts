/**
 * The dashboard in a real browser: Debian's Chromium driven by playwright-core, against the whole
 * service on loopback (its own media server and webhook receiver). Without /usr/bin/chromium
 * (`apt-get install chromium`; .ci/run does it) these tests are skipped with one line.
 * DASHBOARD_SCREENSHOTS=1 also saves the main pages to docs/dashboard-*.png.
 */
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shortJobId } from '../../src/contract/api.js';
import { DASHBOARD_DIR } from '../../src/http/routes/dashboard.js';
import { defaultJobTypes } from '../../src/processors/catalogue.js';
import { createAdminToken } from '../../src/store/admin-tokens.js';
import { portrait, sample } from '../face-swap/fixtures.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startServer, type TestServer } from '../helpers/servers.js';
import { startService, waitFor, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const haveChromium = fs.existsSync(CHROMIUM);
if (!haveChromium) console.log(`browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`);
const SCREENSHOTS = process.env.DASHBOARD_SCREENSHOTS === '1';
const shot = async (page: Page, name: string) => {
  if (!SCREENSHOTS) return;
  // A palette PNG: a fraction of the size, no visible loss on a UI.
  const png = await sharp(await page.screenshot({ fullPage: true }))
    .png({ palette: true, quality: 90, effort: 8 })
    .toBuffer();
  fs.writeFileSync(fileURLToPath(new URL(`../../docs/dashboard-${name}.png`, import.meta.url)), png);
};

/**
 * Whether dist/dashboard is missing or older than a source it is built from (dashboard/, and
 * src/contract/ it imports), so an edited dashboard is never tested from an old build. A fresh
 * build is left alone: other test files (the package test packs dist/) may read it meanwhile.
 */
function dashboardBuildIsStale(): boolean {
  const built = `${DASHBOARD_DIR}index.html`;
  if (!fs.existsSync(built)) return true;
  const at = fs.statSync(built).mtimeMs;
  const root = new URL('../../', import.meta.url);
  const sources = ['dashboard/', 'src/contract/'].flatMap((dir) =>
    fs.readdirSync(new URL(dir, root), { recursive: true, encoding: 'utf8' }).map((f) => new URL(`${dir}${f}`, root)),
  );
  return sources.some((f) => fs.statSync(f).mtimeMs > at);
}

let svc: TestService;
let media: TestServer;
let receiver: Receiver;
let browser: Browser;
let page: Page;
let failWebhooks = true;
/**
 * Where the browser opens the dashboard: the service's public address (PUBLIC_BASE_URL's default,
 * http://localhost:PORT), which its local result URLs use, so result previews are same-origin.
 */
let site: string;
/** Every URL the page made the browser request (CSP-blocked ones included). */
const browserFetched: string[] = [];

describe.skipIf(!haveChromium)('dashboard in Chromium', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    if (dashboardBuildIsStale()) {
      const { build } = await import('vite');
      await build({ configFile: fileURLToPath(new URL('../../dashboard/vite.config.ts', import.meta.url)) });
    }
    const files = new Map<string, Buffer>([
      ['/source.jpg', await portrait('curlyBlonde')],
      ['/target.jpg', sample(6)],
      ['/sample2.jpg', sample(2)],
    ]);
    media = await startServer((req, res) => {
      const body = files.get(req.url ?? '');
      if (!body) return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'image/jpeg', 'access-control-allow-origin': '*' }).end(body);
    });
    // /gone answers 410 Gone (an owner endpoint's receiver saying "stop": disabled at once).
    receiver = await startReceiver((req) => (req.path === '/gone' ? 410 : failWebhooks ? 500 : 200));
    svc = await startService(
      { WORKER_CONCURRENCY: '1' },
      { jobTypes: [...defaultJobTypes({ threads: 1 }), sleepJobType()] },
    );
    site = svc.app.config.publicBaseUrl;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('dialog', (d) => void d.accept());
    page.on('request', (r) => browserFetched.push(r.url()));
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await svc?.stop();
    await media?.close();
    await receiver?.close();
  });

  it('signs in with an API key, kept in sessionStorage and sent as a Bearer header (no cookie)', async () => {
    await page.goto(`${site}/dashboard/`);
    await page.getByLabel('API key').fill(svc.key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Jobs' }).waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem('media-jobs.api-key'))).toBe(svc.key);
    expect(await page.context().cookies()).toEqual([]);
  });

  it('serves the page with a CSP that keeps images and media on this origin', async () => {
    const res = await page.goto(`${site}/dashboard/`);
    const csp = res!.headers()['content-security-policy']!;
    expect(csp).toContain("img-src 'self' data: blob:");
    expect(csp).toContain("media-src 'self' data: blob:");
    expect(csp).not.toMatch(/\*/);
    await page.getByRole('heading', { name: 'Jobs' }).waitFor();
  });

  it('adds a webhook endpoint, rotates its secret and shows its deliveries', async () => {
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
    // A refused URL is shown as an error, styled as on every other page.
    await page.getByLabel('URL').fill('http://169.254.169.254/hook');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page
      .locator('p.error[role=alert]', { hasText: 'url: must be a public http or https URL (host is a link-local' })
      .waitFor();
    const url = receiver.url('/dashboard-endpoint');
    await page.getByLabel('URL').fill(url);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const card = page.getByRole('article', { name: url });
    await card.getByText('enabled').waitFor();
    const before = (await svc.call('GET', '/api/v1/webhook-endpoints')).body.data.endpoints[0];
    expect(before.url).toBe(url);
    await card.getByRole('button', { name: 'Rotate secret' }).click();
    await card
      .getByRole('status')
      .getByText(/^new secret whsec_/)
      .waitFor();
    const after = (await svc.call('GET', `/api/v1/webhook-endpoints/${before.id}`)).body.data;
    expect(after.secret).not.toBe(before.secret);
    await card.locator('code', { hasText: after.secret }).waitFor();
    // A job's event shows up in the endpoint's recent deliveries (the page is loaded afresh).
    const job = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { ms: 0 } },
    });
    await waitFor(async () => {
      const log = await svc.call('GET', `/api/v1/webhook-endpoints/${before.id}/deliveries`);
      return log.body.data.deliveries.length > 0;
    }, 'the delivery');
    await page.reload();
    await card.getByRole('link', { name: shortJobId(job.body.data.uuid) }).waitFor();
    await shot(page, 'endpoints');
    await svc.call('DELETE', `/api/v1/webhook-endpoints/${before.id}`);
    await page.getByRole('link', { name: 'Jobs' }).click();
  });

  it('shows why an endpoint was disabled and enables it again', async () => {
    const url = receiver.url('/gone');
    const created = await svc.call('POST', '/api/v1/webhook-endpoints', { body: { url } });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { ms: 0 } },
    });
    await waitFor(
      async () => (await svc.call('GET', `/api/v1/webhook-endpoints/${id}`)).body.data.status === 'disabled',
      'the 410 to disable the endpoint',
    );
    await page.getByRole('link', { name: 'Webhooks' }).click();
    const card = page.getByRole('article', { name: url });
    // The status badge beside the URL (the note under the actions says what a button did).
    const badge = card.locator('.endpoint-head .status');
    await badge.getByText('disabled', { exact: true }).waitFor();
    await card.locator('.disabled-reason', { hasText: '410' }).waitFor();
    await card.getByRole('button', { name: 'Enable' }).click();
    await badge.getByText('enabled', { exact: true }).waitFor();
    expect((await svc.call('GET', `/api/v1/webhook-endpoints/${id}`)).body.data.status).toBe('enabled');
    expect(await card.getByRole('button', { name: 'Enable' }).count()).toBe(0);
    await svc.call('DELETE', `/api/v1/webhook-endpoints/${id}`);
    await page.getByRole('link', { name: 'Jobs' }).click();
  });

  it(
    'submits a face swap with two faces picked from a detection and advanced settings, and watches it go live to completed',
    { timeout: 240_000 },
    async () => {
      await page.getByRole('link', { name: 'New job' }).click();
      await page.getByLabel('Job type').selectOption('image-face-swap');
      // The model list shows names (a long description in an <option> is cut mid-word); the
      // chosen model's description is whole under it.
      expect(await page.locator('#model option').allTextContents()).toEqual(['warp-blend-v1']);
      expect(await page.locator('#model-description').textContent()).toMatch(/^face-api .+\.$/);
      // A boolean option shows its default (color_correction defaults to true).
      expect(await page.locator('#opt-color_correction').isChecked()).toBe(true);
      // Help texts render `code` spans, never raw backticks.
      const hints = await page.locator('.hint').allTextContents();
      expect(hints.length).toBeGreaterThan(0);
      expect(hints.join('\n')).not.toContain('`');
      expect(await page.locator('.hint code').count()).toBeGreaterThan(0);
      // A one-word code span never breaks inside the word ("referen/ce").
      const broken = await page
        .locator('.hint code')
        .evaluateAll((cs) =>
          cs.filter((c) => !/\s/.test(c.textContent) && c.getClientRects().length > 1).map((c) => c.textContent),
        );
      expect(broken).toEqual([]);
      // A checkbox field keeps the same distance from the help above it as any other field.
      const gap = await page.locator('#opt-color_correction').evaluate((el) => {
        const field = el.closest('.field')!;
        return field.getBoundingClientRect().top - field.previousElementSibling!.getBoundingClientRect().bottom;
      });
      expect(gap).toBeGreaterThanOrEqual(8);
      await page.locator('#slot-source').fill(`${media.origin}/source.jpg`);
      await page.locator('#slot-target').fill(`${media.origin}/target.jpg`);
      // The face picker runs a real face-detect job on the target (seconds on a loaded machine).
      const picker = page.locator('.face-picker[data-slot="target"]');
      await picker.getByRole('button', { name: 'Find faces in the target' }).click();
      const faces = picker.locator('.face-preview .face');
      await picker.locator('.face-list').waitFor({ timeout: 90_000 });
      expect(await picker.locator('.face-status').textContent()).toBe(
        '4 faces found; none ticked: the faces option decides.',
      );
      // Numbered left to right: 0 is the leftmost box, each label on its own box.
      const xs = await faces.locator('rect').evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('x'))));
      expect(xs).toEqual([...xs].sort((a, b) => a - b));
      expect(await faces.locator('text').allTextContents()).toEqual(['0', '1', '2', '3']);
      // The picture itself under the boxes, and each face's thumbnail by its checkbox: data: URIs
      // from the detection's result (this origin's), loaded within the CSP.
      expect(await picker.locator('.face-preview svg image').getAttribute('href')).toMatch(/^data:image\/jpeg;base64,/);
      const thumbs = picker.locator('.face-list img');
      expect(await thumbs.count()).toBe(4);
      await expect
        .poll(() =>
          thumbs.evaluateAll((is) => (is as HTMLImageElement[]).every((i) => i.complete && i.naturalWidth > 0)),
        )
        .toBe(true);
      expect(await thumbs.evaluateAll((is) => is.map((i) => i.getAttribute('src')!.slice(0, 23)))).toEqual(
        Array(4).fill('data:image/jpeg;base64,'),
      );
      // One face picked on the map, one by its checkbox: both land in target_face_indices.
      await picker.locator('.face-preview .face[data-index="3"]').click();
      await picker.getByRole('checkbox', { name: /^face 1\b/ }).check();
      // (the text field follows in an effect, a frame later)
      await expect.poll(() => page.locator('#opt-target_face_indices').inputValue()).toBe('1, 3');
      expect(await picker.locator('.face-preview .face.selected').count()).toBe(2);
      // The fields every job type takes, folded under "Advanced".
      await page.getByText('Advanced: deadline, priority, retention').click();
      await page.locator('#opt-cancel_after').fill('10m');
      await page.locator('#opt-priority').fill('120');
      await page.locator('#opt-retention').fill('1h');
      await shot(page, 'new-job');
      await page.getByRole('button', { name: 'Submit job' }).click();
      await page.getByRole('heading', { name: /^Job / }).waitFor();
      const uuid = page.url().split('/').pop()!;
      const detail = (await svc.call('GET', `/api/v1/jobs/${uuid}`)).body.data;
      expect(detail.input.target_face_indices).toEqual([1, 3]);
      expect(detail.priority).toBe(120);
      expect(Date.parse(detail.deadline) - Date.parse(detail.created_at)).toBe(600_000);
      const row = await svc.app.store.db
        .selectFrom('jobs')
        .select('retention_ms')
        .where('uuid', '=', uuid)
        .executeTakeFirstOrThrow();
      expect(Number(row.retention_ms)).toBe(3_600_000);
      // The live view moves through processing to completed without a reload.
      await page.locator('.summary .status-completed').waitFor({ timeout: 110_000 });
      expect(await page.locator('.timeline').textContent()).toMatch(/finished \(completed\)/);
      // Inputs are links, never previews: the browser fetched nothing from the media server itself.
      expect(await page.locator(`a[href="${media.origin}/source.jpg"]`).count()).toBe(1);
      expect(await page.locator(`img[src^="${media.origin}"]`).count()).toBe(0);
      expect(browserFetched.filter((u) => new URL(u).origin === media.origin)).toEqual([]);
      // The result: preview and download link to the signed URL.
      const img = page.locator('#result-h ~ figure img');
      await img.waitFor();
      const src = await img.getAttribute('src');
      expect(src).toContain(`/results/`);
      expect((await fetch(src!)).status).toBe(200);
      await page.getByRole('link', { name: 'Download result' }).waitFor();
      await shot(page, 'job');
      expect(uuid).toMatch(/^[0-9a-f-]{36}$/);

      // Opened again after it finished: created, started, finished at their own times; no step
      // stamped with the time the page was opened.
      await page.reload();
      await page.locator('.summary .status-completed').waitFor();
      await page.locator('.timeline li').nth(2).waitFor();
      await new Promise((r) => setTimeout(r, 1500)); // the event stream's first answer has arrived
      const entries = await page.locator('.timeline li').allTextContents();
      const job = (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data;
      const shown = (iso: string) => page.evaluate((t) => new Date(t).toLocaleString(), iso);
      expect(entries).toEqual([
        `${await shown(job.created_at)} created`,
        `${await shown(job.started_at)} started`,
        `${await shown(job.finished_at)} finished (completed)`,
      ]);
    },
  );

  it(
    "shows sample2's profile as a face the swap cannot take: not pickable, with the reason",
    { timeout: 240_000 },
    async () => {
      await page.getByRole('link', { name: 'New job' }).click();
      await page.getByLabel('Job type').selectOption('image-face-swap');
      await page.locator('#slot-source').fill(`${media.origin}/source.jpg`);
      await page.locator('#slot-target').fill(`${media.origin}/sample2.jpg`);
      const picker = page.locator('.face-picker[data-slot="target"]');
      await picker.getByRole('button', { name: 'Find faces in the target' }).click();
      await picker.locator('.face-list').waitFor({ timeout: 90_000 });
      expect(await picker.locator('.face-status').textContent()).toBe(
        '3 faces found (1 the swap cannot take); none ticked: the faces option decides.',
      );
      // The leftmost face (the profile): a disabled checkbox saying why, a dashed box on the map.
      expect(await picker.getByRole('checkbox', { name: /^face 0\b/ }).isDisabled()).toBe(true);
      expect(await picker.getByRole('checkbox', { name: /^face 1\b/ }).isDisabled()).toBe(false);
      expect(await picker.locator('.face-choice.refused').count()).toBe(1);
      expect(await picker.locator('.face-choice.refused .refusal').textContent()).toBe(
        'in profile (turned too far): the swap cannot take it',
      );
      expect(await picker.locator('.face-preview .face.refused').getAttribute('data-index')).toBe('0');
      // A click on its box picks nothing; a frontal face's box picks that face.
      await picker.locator('.face-preview .face[data-index="0"]').click();
      await picker.locator('.face-preview .face[data-index="2"]').click();
      await expect.poll(() => page.locator('#opt-target_face_indices').inputValue()).toBe('2');
      expect(await picker.locator('.face-preview .face.selected').count()).toBe(1);
      // Typed into the option by hand, the profile is flagged: the job would fail.
      await page.locator('#opt-target_face_indices').fill('0, 2');
      await picker.locator('p.error', { hasText: 'Face 0 is in profile (turned too far)' }).waitFor();
    },
  );

  it('cancels a queued job from its page, shows progress bars and deletes the job', async () => {
    const sleep = (ms: number) =>
      svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms } },
      });
    const blocker = (await sleep(120_000)).body.data;
    await waitFor(
      async () => (await svc.call('GET', `/api/v1/jobs/${blocker.uuid}/status`)).body.data.status === 'processing',
      'the blocker to run',
    );
    const queued = (await sleep(1)).body.data;
    await page.goto(`${site}/dashboard/#/jobs`);
    await page.locator(`tr[data-uuid="${queued.uuid}"] .status-queued`).waitFor();
    // The running job reports its stage: a progress bar in the list.
    await page.locator(`tr[data-uuid="${blocker.uuid}"] progress`).waitFor();
    await shot(page, 'jobs');
    // On the running job's page the Cancel button sits below the progress label, not against it.
    await page.goto(`${site}/dashboard/#/jobs/${blocker.uuid}`);
    await page.locator('.progress-label').waitFor();
    const label = (await page.locator('.progress-label').boundingBox())!;
    const button = (await page.getByRole('button', { name: 'Cancel job' }).boundingBox())!;
    expect(button.y).toBeGreaterThanOrEqual(label.y + label.height + 4);
    await page.goto(`${site}/dashboard/#/jobs`);
    await page.locator(`tr[data-uuid="${queued.uuid}"] a`).click();
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.locator('.summary .status-cancelled').waitFor();
    expect((await svc.call('GET', `/api/v1/jobs/${queued.uuid}/status`)).body.data.status).toBe('cancelled');
    // A finished job's data can be deleted from its page (after a confirmation).
    // (the page accepts every confirmation: the dialog handler set when the page opened)
    await page.getByRole('button', { name: 'Delete job data' }).click();
    await page.getByText("This job's data (input, webhook, result) was deleted.").waitFor();
    expect((await svc.call('GET', `/api/v1/jobs/${queued.uuid}/status`)).body.data.data_removed).toBe(true);
    await svc.call('POST', `/api/v1/jobs/${blocker.uuid}/cancel`);
  });

  it('lists a failed job with its error type, and the site has an icon', async () => {
    const failed = (
      await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms: 1, fail: 'processing_error' } },
      })
    ).body.data;
    await waitFor(
      async () => (await svc.call('GET', `/api/v1/jobs/${failed.uuid}/status`)).body.data.status === 'failed',
      'the job to fail',
    );
    const missing: string[] = [];
    page.on('response', (r) => {
      if (r.status() === 404) missing.push(r.url());
    });
    await page.goto(`${site}/dashboard/#/jobs`);
    const row = page.locator(`tr[data-uuid="${failed.uuid}"]`);
    await row.locator('.status-failed').waitFor();
    expect(await row.locator('.error-type').textContent()).toBe('processing_error');
    expect(await row.textContent()).toContain('the test processor failed on purpose');
    const icon = await fetch(`${site}/favicon.ico`);
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    expect(await page.locator('link[rel="icon"]').getAttribute('href')).toBe('/dashboard/favicon.svg');
    expect(missing).toEqual([]);
  });

  it("shows a failed webhook's attempts and redelivers it", async () => {
    const job = (
      await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms: 1 }, webhook: { url: receiver.url('/hook') } },
      })
    ).body.data;
    await page.goto(`${site}/dashboard/#/jobs/${job.uuid}`);
    const delivery = page.locator('.delivery');
    await delivery.locator('.state-failed').waitFor({ timeout: 60_000 });
    expect(await delivery.locator('tbody tr').count()).toBe(5);
    expect(await delivery.locator('tbody').textContent()).toContain('500');
    failWebhooks = false;
    await delivery.getByRole('button', { name: /^Redeliver/ }).click();
    await delivery.locator('.state-delivered').waitFor();
    expect(await delivery.locator('tbody tr').count()).toBe(6);
    expect(await delivery.locator('tbody tr').last().textContent()).toContain('(redelivery)');
  });

  it('as operator, sees the queue and creates and revokes a key', async () => {
    const { token } = await createAdminToken(svc.app.store.db, Date.now());
    await page.goto(`${site}/dashboard/#/operator`);
    // An API key is not an admin token.
    await page.getByLabel('Admin token').fill(svc.key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    await page.getByLabel('Admin token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Operator' }).waitFor();
    await page
      .locator('#finished-hour')
      .filter({ hasText: /^[1-9]/ })
      .waitFor();
    await page.getByLabel('Owner').fill('carol');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.locator('#new-key').textContent())!;
    expect((await svc.call('GET', '/api/v1/jobs', { key })).status).toBe(200);
    await shot(page, 'operator');
    const row = page.locator('tr', { hasText: 'carol' });
    await row.getByRole('button', { name: /^Revoke key/ }).click();
    await row.getByText(/^revoked/).waitFor();
    await waitFor(
      async () => (await svc.call('GET', '/api/v1/jobs', { key })).status === 401,
      'the key to stop working',
    );
  });
});
