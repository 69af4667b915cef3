import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeLookup } from '../helpers/servers.js';
import { startService, type TestService } from '../helpers/service.js';

// Production address rule (private networks NOT allowed), with DNS faked so nothing leaves the machine.
const lookup = fakeLookup({
  'media.example.com': ['93.184.216.34'],
  'hooks.example.com': ['93.184.216.35'],
  'rebind.example.com': ['10.0.0.8'],
  'mixed.example.com': ['93.184.216.36', '127.0.0.1'],
});

let svc: TestService;
beforeAll(async () => {
  svc = await startService({ MEDIA_ALLOW_PRIVATE_NETWORKS: 'false', WORKER_CONCURRENCY: '0' }, { lookup });
});
afterAll(() => svc?.stop());

const good = () => ({
  job_type: 'image-transform',
  model: 'lanczos3',
  input: { source: 'https://media.example.com/photo.jpg', width: 512, format: 'webp' },
});

async function jobCount(): Promise<number> {
  const row = await svc.app.store.db
    .selectFrom('jobs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}

const submit = (body: unknown, path = 'image-transform') => svc.call('POST', `/api/v1/jobs/submit/${path}`, { body });

describe('submit validation', () => {
  it('accepts a valid body with a public URL', async () => {
    const r = await submit(good());
    expect(r.status).toBe(200);
    expect(r.body.data.status).toBe('queued');
  });

  const cases: Array<[string, (b: any) => unknown, number, string | RegExp]> = [
    [
      'job_type differs from the path',
      (b) => ({ ...b, job_type: 'image-face-swap' }),
      400,
      'job_type: must equal the path\'s job type "image-transform" (got "image-face-swap")',
    ],
    ['job_type missing', ({ job_type: _, ...b }) => b, 400, 'job_type: is required'],
    ['job_type not a string', (b) => ({ ...b, job_type: 7 }), 400, 'job_type: must be "image-transform"'],
    ['model missing', ({ model: _, ...b }) => b, 400, 'model: is required'],
    [
      'model unknown',
      (b) => ({ ...b, model: 'bicubic' }),
      400,
      'model: must be one of "lanczos3", "mitchell", "nearest"',
    ],
    ['input missing', ({ input: _, ...b }) => b, 400, 'input: is required'],
    [
      'input not an object',
      (b) => ({ ...b, input: 'https://media.example.com/a.jpg' }),
      400,
      'input: must be an object',
    ],
    ['input an array', (b) => ({ ...b, input: [] }), 400, 'input: must be an object'],
    ['source missing', (b) => ({ ...b, input: { width: 5 } }), 400, 'input.source: is required'],
    [
      'source a number',
      (b) => ({ ...b, input: { source: 5 } }),
      400,
      'input.source: must be a URL string or a non-empty array of URL strings',
    ],
    ['source an empty array', (b) => ({ ...b, input: { source: [] } }), 400, 'input.source: must have at least 1 URL'],
    [
      'source with two URLs',
      (b) => ({ ...b, input: { source: ['https://media.example.com/a.jpg', 'https://media.example.com/b.jpg'] } }),
      400,
      'input.source: takes at most 1 URL',
    ],
    [
      'source array holding a number',
      (b) => ({ ...b, input: { source: [5] } }),
      400,
      'input.source[0]: must be a string',
    ],
    [
      'unused slot',
      (b) => ({ ...b, input: { ...b.input, audio: 'https://media.example.com/a.mp3' } }),
      400,
      'input.audio: unknown field',
    ],
    [
      // One message, not the schema's and the URL policy's limits side by side.
      'source over the URL length limit',
      (b) => ({ ...b, input: { source: `https://media.example.com/${'a'.repeat(5000)}` } }),
      400,
      'input.source: must be at most 4096 characters',
    ],
    [
      'webhook url over the URL length limit',
      (b) => ({ ...b, webhook: { url: `https://hooks.example.com/${'a'.repeat(5000)}` } }),
      400,
      'webhook.url: must be at most 4096 characters',
    ],
    ['unknown option', (b) => ({ ...b, input: { ...b.input, sharpen: true } }), 400, 'input.sharpen: unknown field'],
    ['bad option type', (b) => ({ ...b, input: { ...b.input, width: 'wide' } }), 400, 'input.width: must be a number'],
    [
      'non-integer option',
      (b) => ({ ...b, input: { ...b.input, width: 1.5 } }),
      400,
      /^input\.width: must be an integer/,
    ],
    [
      'option out of range',
      (b) => ({ ...b, input: { ...b.input, quality: 101 } }),
      400,
      'input.quality: must be at most 100',
    ],
    [
      'bad enum option',
      (b) => ({ ...b, input: { ...b.input, format: 'bmp' } }),
      400,
      'input.format: must be one of "jpeg", "png", "webp", "avif"',
    ],
    ['unknown top-level field', (b) => ({ ...b, urgency: 1 }), 400, 'urgency: unknown field'],
    [
      'webhook not an object',
      (b) => ({ ...b, webhook: 'https://hooks.example.com/' }),
      400,
      'webhook: must be an object',
    ],
    ['webhook without url', (b) => ({ ...b, webhook: { secret: 's' } }), 400, 'webhook.url: is required'],
    [
      'webhook url private',
      (b) => ({ ...b, webhook: { url: 'http://10.1.2.3/hook' } }),
      400,
      'webhook.url: must be a public http or https URL (host is a private address)',
    ],
    [
      'webhook bad event',
      (b) => ({ ...b, webhook: { url: 'https://hooks.example.com/h', events: ['job.processing'] } }),
      400,
      'webhook.events[0]: must be one of "job.completed", "job.failed", "job.cancelled"',
    ],
    [
      'webhook empty events',
      (b) => ({ ...b, webhook: { url: 'https://hooks.example.com/h', events: [] } }),
      400,
      'webhook.events: must have at least 1 item',
    ],
    [
      'webhook repeated events',
      (b) => ({ ...b, webhook: { url: 'https://hooks.example.com/h', events: ['job.failed', 'job.failed'] } }),
      400,
      'webhook.events: must not repeat an event',
    ],
    [
      'webhook empty secret',
      (b) => ({ ...b, webhook: { url: 'https://hooks.example.com/h', secret: '' } }),
      400,
      'webhook.secret: must not be empty',
    ],
    [
      'webhook unknown field',
      (b) => ({ ...b, webhook: { url: 'https://hooks.example.com/h', retries: 3 } }),
      400,
      'webhook.retries: unknown field',
    ],
  ];

  it.each(cases)(
    'rejects %s with a message naming the field, creating nothing',
    async (_name, mutate, status, message) => {
      const before = await jobCount();
      const r = await submit(mutate(good()));
      expect(r.status).toBe(status);
      expect(r.body.code).toBe(-1);
      expect(r.body.data).toEqual({});
      if (typeof message === 'string') expect(r.body.message).toBe(message);
      else expect(r.body.message).toMatch(message);
      expect(await jobCount()).toBe(before);
    },
  );

  it('answers 404 for an unknown job type', async () => {
    const r = await submit({ ...good(), job_type: 'video-upscale' }, 'video-upscale');
    expect(r.status).toBe(404);
    expect(r.body.message).toMatch(/^unknown job type "video-upscale"/);
  });

  it('accepts a webhook with a public URL, a secret and an event filter', async () => {
    const r = await submit({
      ...good(),
      webhook: { url: 'https://hooks.example.com/h', secret: 'shh', events: ['job.failed'] },
    });
    expect(r.status).toBe(200);
  });
});

describe('hostile media URLs at submit (address rule on)', () => {
  const hostile: Array<[string, string]> = [
    ['http://127.0.0.1/a.jpg', 'host is a private address'],
    ['http://127.1/a.jpg', 'host is a private address'],
    ['http://2130706433/a.jpg', 'host is a private address'],
    ['http://0177.0.0.1/a.jpg', 'host is a private address'],
    ['http://0x7f.0.0.1/a.jpg', 'host is a private address'],
    ['http://0x7f000001/a.jpg', 'host is a private address'],
    ['http://[::1]/a.jpg', 'host is a private address'],
    ['http://[::ffff:127.0.0.1]/a.jpg', 'host is a private address'],
    ['http://[::ffff:7f00:1]/a.jpg', 'host is a private address'],
    ['http://10.0.0.1/a.jpg', 'host is a private address'],
    ['http://172.16.5.4/a.jpg', 'host is a private address'],
    ['http://192.168.1.1/a.jpg', 'host is a private address'],
    ['http://169.254.169.254/latest/meta-data/', 'host is a private address'],
    ['http://100.64.0.1/a.jpg', 'host is a private address'],
    ['http://0.0.0.0/a.jpg', 'host is a private address'],
    ['http://[fe80::1]/a.jpg', 'host is a private address'],
    ['http://[fd00:ec2::254]/a.jpg', 'host is a private address'],
    ['http://224.0.0.1/a.jpg', 'host is a private address'],
    ['http://192.0.2.10/a.jpg', 'host is a private address'],
    ['http://localhost/a.jpg', 'host is a local name'],
    ['http://user:pass@media.example.com/a.jpg', 'credentials are not allowed'],
    ['file:///etc/passwd', 'scheme must be http or https'],
    ['ftp://media.example.com/a.jpg', 'scheme must be http or https'],
    ['gopher://media.example.com/', 'scheme must be http or https'],
    ['/relative/a.jpg', 'not an absolute URL'],
    ['https://rebind.example.com/a.jpg', 'host resolves to a private address'],
    ['https://mixed.example.com/a.jpg', 'host resolves to a private address'],
    ['https://nowhere.example.com/a.jpg', 'host does not resolve'],
  ];
  it.each(hostile)('rejects %s', async (url, reason) => {
    const before = await jobCount();
    const r = await submit({ ...good(), input: { source: url } });
    expect(r.status).toBe(400);
    expect(r.body.message).toBe(`input.source: must be a public http or https URL (${reason})`);
    expect(await jobCount()).toBe(before);
  });

  it('names the array index of the bad URL', async () => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: { ...good(), input: { source: ['http://10.0.0.1/a.jpg'] } },
    });
    expect(r.body.message).toBe('input.source[0]: must be a public http or https URL (host is a private address)');
  });
});
