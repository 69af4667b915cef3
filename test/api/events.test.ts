import { EventSource } from 'eventsource';
import { EventSourceParserStream, type EventSourceMessage } from 'eventsource-parser/stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, type TestService } from '../helpers/service.js';

// GET /api/v1/jobs/{uuid}/events over real HTTP: order, the terminal end, owner isolation, and
// that a client going away releases the stream's listener, timer and slot.
let svc: TestService;
beforeAll(async () => {
  svc = await startService({ WORKER_CONCURRENCY: '1' }, { jobTypes: [sleepJobType()] });
});
afterAll(() => svc?.stop());

const submitted: string[] = [];
const submit = async (input: Record<string, unknown>) => {
  const data = (
    await svc.call('POST', '/api/v1/jobs/submit/test-sleep', { body: { job_type: 'test-sleep', model: 'v1', input } })
  ).body.data as { uuid: string };
  submitted.push(data.uuid);
  return data;
};
// A failed test must not leave the one worker slot busy for the next one.
afterEach(async () => {
  for (const uuid of submitted.splice(0)) await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
});
const status = async (uuid: string) =>
  (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data as { status: string };
const openStreams = async () =>
  (await svc.app.metrics.registry.getSingleMetric('media_jobs_event_streams')!.get()).values[0]?.value ?? 0;

interface Watch {
  events: EventSourceMessage[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  next(pred: (e: EventSourceMessage) => boolean, what: string): Promise<EventSourceMessage>;
  abort(): void;
}

async function watch(uuid: string, key = svc.key): Promise<Watch> {
  const ctrl = new AbortController();
  const res = await fetch(`${svc.base}/api/v1/jobs/${uuid}/events`, {
    headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
    signal: ctrl.signal,
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const events: EventSourceMessage[] = [];
  const reader = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  const ended = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        events.push(value);
      }
    } catch (err) {
      if (!ctrl.signal.aborted) throw err;
    }
  })();
  return {
    events,
    ended,
    next: (pred, what) => waitFor(() => events.find(pred), what),
    abort: () => ctrl.abort(),
  };
}

const job = (e: EventSourceMessage) => JSON.parse(e.data) as { uuid: string; status: string; status_detail: string };

describe('GET /api/v1/jobs/{uuid}/events', () => {
  it('sends status changes and progress in order and ends on the terminal state', async () => {
    // One worker slot, taken: the watched job starts queued, second in line.
    const blocker = await submit({ ms: 120_000 });
    await waitFor(async () => (await status(blocker.uuid)).status === 'processing', 'the blocker to run');
    const ahead = await submit({ ms: 120_000 });
    const target = await submit({ ms: 120_000 });
    const w = await watch(target.uuid);
    const first = await w.next(() => true, 'the first event');
    expect(first.event).toBe('status');
    expect(job(first)).toMatchObject({ uuid: target.uuid, status: 'queued' });
    expect(job(first).status_detail).toContain('position 2');

    // The job ahead leaves the queue: a progress event with the new position, same status.
    await svc.call('POST', `/api/v1/jobs/${ahead.uuid}/cancel`);
    const moved = await w.next(
      (e) => e.event === 'progress' && job(e).status_detail.includes('position 1'),
      'progress in the queue',
    );
    expect(job(moved).status).toBe('queued');

    await svc.call('POST', `/api/v1/jobs/${blocker.uuid}/cancel`);
    await w.next((e) => e.event === 'status' && job(e).status === 'processing', 'processing');
    // The processor's own progress report reaches the stream.
    await w.next((e) => job(e).status_detail === 'sleeping', "the processor's progress");
    await svc.call('POST', `/api/v1/jobs/${target.uuid}/cancel`);
    await w.ended;

    const last = w.events.at(-1)!;
    expect(last.event).toBe('status');
    expect(job(last)).toMatchObject({ status: 'cancelled', status_detail: 'cancelled by the client' });
    // Each event has an id of its own (naming its state); status events are exactly the changes,
    // in order; progress keeps the status.
    const ids = w.events.map((e) => e.id);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const statuses = w.events.filter((e) => e.event === 'status').map((e) => job(e).status);
    expect(statuses).toEqual(['queued', 'processing', 'cancelled']);
    let current = '';
    for (const e of w.events) {
      if (e.event === 'progress') expect(job(e).status).toBe(current);
      current = job(e).status;
    }
    await waitFor(async () => (await openStreams()) === 0, 'the stream slot to be released');
  });

  it('ends after a completed job reaches completed', async () => {
    const j = await submit({ ms: 50 });
    const w = await watch(j.uuid);
    await w.ended;
    const last = w.events.at(-1)!;
    expect(last.event).toBe('status');
    expect(job(last)).toMatchObject({ status: 'completed', status_detail: 'done' });
    expect(JSON.parse(last.data).result_ready).toBe(true);
  });

  it('answers a job that is already terminal with one status event, then ends', async () => {
    const j = await submit({ ms: 1 });
    await waitFor(async () => (await status(j.uuid)).status === 'completed', 'completion');
    const w = await watch(j.uuid);
    await w.ended;
    expect(w.events.map((e) => [e.event, job(e).status])).toEqual([['status', 'completed']]);
  });

  it("answers another owner's job and a malformed uuid with the 404 envelope", async () => {
    const j = await submit({ ms: 1 });
    const bob = await svc.newKey('bob');
    for (const [uuid, key] of [
      [j.uuid, bob],
      ['not-a-uuid', svc.key],
      ['00000000-0000-4000-8000-000000000000', svc.key],
    ] as const) {
      const r = await svc.call('GET', `/api/v1/jobs/${uuid}/events`, { key });
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ code: -1, message: 'job not found', data: {} });
    }
    expect((await svc.call('GET', `/api/v1/jobs/${j.uuid}/events`, { key: null })).status).toBe(401);
  });

  it('frees the listener, timer and slot of a client that disconnects', async () => {
    const j = await submit({ ms: 120_000 });
    const listeners = svc.app.signals.listenerCount('job-finished');
    const before = await openStreams();
    const w = await watch(j.uuid);
    await w.next(() => true, 'the first event');
    expect(svc.app.signals.listenerCount('job-finished')).toBe(listeners + 1);
    expect(await openStreams()).toBe(before + 1);
    w.abort();
    await w.ended;
    await waitFor(() => svc.app.signals.listenerCount('job-finished') === listeners, 'the listener to be removed');
    await waitFor(async () => (await openStreams()) === before, 'the stream to be released');
  });
});

describe('with a standard EventSource client (npm eventsource)', () => {
  /** An EventSource that sends the API key (a browser's cannot; the npm one takes a fetch), counting its connections. */
  function open(uuid: string) {
    const connections: Array<{ status: number; lastEventId: string | null }> = [];
    const received: Array<{ type: string; id: string; status: string }> = [];
    const es = new EventSource(`${svc.base}/api/v1/jobs/${uuid}/events`, {
      fetch: async (url, init) => {
        const headers = { ...init.headers, authorization: `Bearer ${svc.key}` };
        const res = await fetch(url, { ...init, headers });
        connections.push({ status: res.status, lastEventId: new Headers(headers).get('last-event-id') });
        return res;
      },
    });
    const record = (type: string) => (e: MessageEvent<string>) =>
      received.push({ type, id: e.lastEventId, status: (JSON.parse(e.data) as { status: string }).status });
    es.addEventListener('status', record('status'));
    es.addEventListener('progress', record('progress'));
    return { es, connections, received };
  }

  it('stops after the terminal event: the reconnect with its id gets 204, and nothing is sent twice', async () => {
    const j = await submit({ ms: 300 });
    const { es, connections, received } = open(j.uuid);
    try {
      await waitFor(() => es.readyState === EventSource.CLOSED, 'the EventSource to give up');
      // The server ended the stream after `completed`; the client reconnected once with that
      // event's id, was answered 204, and stopped.
      expect(connections.map((c) => c.status)).toEqual([200, 204]);
      const terminal = received.at(-1)!;
      expect(terminal).toMatchObject({ type: 'status', status: 'completed' });
      expect(connections[1]!.lastEventId).toBe(terminal.id);
      expect(received.filter((e) => e.status === 'completed')).toHaveLength(1);
      // Ids name states, never a per-connection counter.
      expect(new Set(received.map((e) => e.id)).size).toBe(received.length);
      expect(received.map((e) => e.id)).not.toContain('1');
    } finally {
      es.close();
    }
  });

  it('resumes after Last-Event-ID: the state the client has is not sent again', async () => {
    const j = await submit({ ms: 120_000 });
    await waitFor(async () => (await status(j.uuid)).status === 'processing', 'the job to run');
    const first = await watch(j.uuid);
    // The job's last state before the cancel: processing, its processor sleeping.
    const seen = await first.next((e) => job(e).status_detail === 'sleeping', 'the sleeping state');
    first.abort();
    // A reconnect with that id: nothing until the state changes, then the change.
    const ctrl = new AbortController();
    const res = await fetch(`${svc.base}/api/v1/jobs/${j.uuid}/events`, {
      headers: { authorization: `Bearer ${svc.key}`, 'last-event-id': seen.id! },
      signal: ctrl.signal,
    });
    expect(res.status).toBe(200);
    const events: EventSourceMessage[] = [];
    const reader = res
      .body!.pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream())
      .getReader();
    const reading = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        events.push(value);
      }
    })();
    await svc.call('POST', `/api/v1/jobs/${j.uuid}/cancel`);
    await reading;
    expect(events.map((e) => [e.event, job(e).status])).toEqual([['status', 'cancelled']]);
    // And a reconnect with the terminal id is told there is nothing more.
    const done = await fetch(`${svc.base}/api/v1/jobs/${j.uuid}/events`, {
      headers: { authorization: `Bearer ${svc.key}`, 'last-event-id': events[0]!.id! },
    });
    expect(done.status).toBe(204);
    expect(await done.text()).toBe('');
  });
});
