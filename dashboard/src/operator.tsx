import { useEffect, useState } from 'preact/hooks';
import { shortJobId } from '../../src/contract/api.js';
import { admin, when } from './api';
import { ErrorNote } from './common';
import { OperatorSignIn } from './sign-in';

interface Overview {
  queue: { queued: number; processing: number };
  throughput: {
    per_minute: Array<{ minute: string; finished: number }>;
    finished_last_hour: number;
  };
}
interface Workers {
  local: Array<{ id: string; concurrency: number; active_jobs: number; job_types: string[] }>;
  remote: Array<{
    id: string;
    name: string;
    job_types: string[];
    last_seen_at: string | null;
    revoked_at: string | null;
  }>;
}
interface Key {
  id: string;
  owner: string;
  prefix: string;
  created_at: string;
  revoked_at: string | null;
}
interface Failed {
  event_id: string;
  job_uuid: string;
  owner: string;
  event_type: string;
  url: string;
  attempts: number;
  failed_at: string;
  last_status: number | null;
  last_error: string | null;
}

/** Finished jobs per minute, last hour: an SVG bar chart with a text equivalent. */
function Chart({ points }: { points: Array<{ minute: string; finished: number }> }) {
  const max = Math.max(1, ...points.map((p) => p.finished));
  const w = 600;
  const h = 120;
  const bw = w / points.length;
  const total = points.reduce((n, p) => n + p.finished, 0);
  return (
    <figure class="chart">
      <svg
        viewBox={`0 0 ${w} ${h + 16}`}
        role="img"
        aria-label={`Finished jobs per minute over the last hour: ${total} in all, at most ${max} in one minute`}
      >
        <line x1="0" y1={h} x2={w} y2={h} class="axis" />
        {points.map((p, i) => {
          const bh = (p.finished / max) * (h - 4);
          return (
            <rect x={i * bw + 1} y={h - bh} width={bw - 2} height={bh} class="bar">
              <title>
                {new Date(p.minute).toLocaleTimeString()}: {p.finished}
              </title>
            </rect>
          );
        })}
        <text x="0" y={h + 14}>
          −60 min
        </text>
        <text x={w} y={h + 14} text-anchor="end">
          now
        </text>
        <text x="2" y="12">
          {max}/min
        </text>
      </svg>
    </figure>
  );
}

interface Disabled {
  id: string;
  owner: string;
  url: string;
  disabled_reason: string | null;
  disabled_at: string | null;
}

interface OperatorData {
  overview: Overview | null;
  workers: Workers | null;
  keys: Key[];
  failed: Failed[];
  disabled: Disabled[];
}

/** Everything the page shows, read together, and again every 5 s while the tab is visible. */
function useOperatorData(token: string | null, setError: (e: string | null) => void) {
  const [data, setData] = useState<OperatorData>({ overview: null, workers: null, keys: [], failed: [], disabled: [] });
  const load = async () => {
    try {
      const [overview, workers, k, f, d] = await Promise.all([
        admin<Overview>('/overview'),
        admin<Workers>('/workers'),
        admin<{ keys: Key[] }>('/keys'),
        admin<{ deliveries: Failed[] }>('/failed-deliveries'),
        admin<{ endpoints: Disabled[] }>('/webhook-endpoints/disabled'),
      ]);
      setData({ overview, workers, keys: k.keys, failed: f.deliveries, disabled: d.endpoints });
      setError(null);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  useEffect(() => {
    if (!token) return;
    void load();
    const t = setInterval(() => document.visibilityState === 'visible' && void load(), 5000);
    return () => clearInterval(t);
  }, [token]);
  return { data, load };
}

function QueueStats({ overview }: { overview: Overview | null }) {
  return (
    <div class="grid">
      <section aria-labelledby="queue-h">
        <h2 id="queue-h">Queue</h2>
        <dl class="stats">
          <div>
            <dt>Queued</dt>
            <dd id="queued">{overview?.queue.queued ?? '…'}</dd>
          </div>
          <div>
            <dt>Processing</dt>
            <dd id="processing">{overview?.queue.processing ?? '…'}</dd>
          </div>
          <div>
            <dt>Finished, last hour</dt>
            <dd id="finished-hour">{overview?.throughput.finished_last_hour ?? '…'}</dd>
          </div>
        </dl>
      </section>
      <section aria-labelledby="tp-h">
        <h2 id="tp-h">Throughput (finished jobs per minute)</h2>
        {overview && <Chart points={overview.throughput.per_minute} />}
        {overview && <small class="hint">All processes of the service, from the database's counters.</small>}
      </section>
    </div>
  );
}

function WorkersTable({ workers }: { workers: Workers | null }) {
  return (
    <section aria-labelledby="workers-h">
      <h2 id="workers-h">Workers</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Worker</th>
            <th scope="col">Kind</th>
            <th scope="col">Busy</th>
            <th scope="col">Job types</th>
            <th scope="col">Last seen</th>
          </tr>
        </thead>
        <tbody>
          {workers?.local.map((w) => (
            <tr>
              <td class="mono">{w.id}</td>
              <td>in-process</td>
              <td>
                {w.active_jobs} / {w.concurrency}
              </td>
              <td>{w.job_types.join(', ')}</td>
              <td>now</td>
            </tr>
          ))}
          {workers?.remote.map((w) => (
            <tr>
              <td class="mono">{w.name}</td>
              <td>remote{w.revoked_at ? ' (revoked)' : ''}</td>
              <td>—</td>
              <td>{w.job_types.join(', ')}</td>
              <td>{when(w.last_seen_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {workers && workers.local.length + workers.remote.length === 0 && (
        <p>No workers in this process and no remote workers.</p>
      )}
    </section>
  );
}

function KeyRow({ k, onRevoke }: { k: Key; onRevoke: () => void }) {
  return (
    <tr data-key={k.id}>
      <td class="mono">{k.id}</td>
      <td>{k.owner}</td>
      <td class="mono">{k.prefix}…</td>
      <td>{when(k.created_at)}</td>
      <td>{k.revoked_at ? `revoked ${when(k.revoked_at)}` : 'active'}</td>
      <td>
        {!k.revoked_at && (
          <button type="button" class="danger" onClick={onRevoke} aria-label={`Revoke key ${k.id} of ${k.owner}`}>
            Revoke
          </button>
        )}
      </td>
    </tr>
  );
}

/** API keys: create one (its secret shown once), revoke one. */
function Keys(props: { keys: Key[]; reload: () => Promise<void>; setError: (e: string | null) => void }) {
  const [owner, setOwner] = useState('');
  const [created, setCreated] = useState<{ id: string; owner: string; key: string } | null>(null);
  const attempt = async (action: () => Promise<void>) => {
    try {
      await action();
      await props.reload();
    } catch (err) {
      props.setError((err as Error).message);
    }
  };
  const createKey = (e: Event) => {
    e.preventDefault();
    void attempt(async () => {
      setCreated(await admin('/keys', { method: 'POST', body: { owner: owner.trim() } }));
      setOwner('');
    });
  };
  const revoke = (id: string) => {
    if (!confirm(`Revoke key ${id}? Clients using it get 401 at once.`)) return;
    void attempt(async () => {
      await admin(`/keys/${id}/revoke`, { method: 'POST' });
    });
  };
  return (
    <section aria-labelledby="keys-h">
      <h2 id="keys-h">API keys</h2>
      <form class="inline" onSubmit={createKey}>
        <label for="key-owner">Owner</label>
        <input id="key-owner" required maxLength={200} value={owner} onInput={(e) => setOwner(e.currentTarget.value)} />
        <button type="submit">Create key</button>
      </form>
      {created && (
        <p class="notice" role="status">
          Key {created.id} for {created.owner}, shown only this once: <code id="new-key">{created.key}</code>
        </p>
      )}
      <table>
        <thead>
          <tr>
            <th scope="col">Id</th>
            <th scope="col">Owner</th>
            <th scope="col">Prefix</th>
            <th scope="col">Created</th>
            <th scope="col">State</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {props.keys.map((k) => (
            <KeyRow k={k} onRevoke={() => revoke(k.id)} />
          ))}
        </tbody>
      </table>
    </section>
  );
}

function DisabledEndpoints({ disabled }: { disabled: Disabled[] }) {
  return (
    <section aria-labelledby="disabled-h">
      <h2 id="disabled-h">Disabled webhook endpoints</h2>
      {disabled.length === 0 ? (
        <p>None.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Disabled</th>
              <th scope="col">Owner</th>
              <th scope="col">Endpoint</th>
              <th scope="col">URL</th>
              <th scope="col">Why</th>
            </tr>
          </thead>
          <tbody>
            {disabled.map((e) => (
              <tr>
                <td>{when(e.disabled_at)}</td>
                <td>{e.owner}</td>
                <td class="mono">{e.id}</td>
                <td class="mono">{e.url}</td>
                <td>{e.disabled_reason ?? '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function FailedDeliveries({ failed }: { failed: Failed[] }) {
  return (
    <section aria-labelledby="failed-h">
      <h2 id="failed-h">Failed webhook deliveries</h2>
      {failed.length === 0 ? (
        <p>None.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Failed</th>
              <th scope="col">Owner</th>
              <th scope="col">Job</th>
              <th scope="col">Event</th>
              <th scope="col">URL</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last answer</th>
            </tr>
          </thead>
          <tbody>
            {failed.map((f) => (
              <tr>
                <td>{when(f.failed_at)}</td>
                <td>{f.owner}</td>
                <td class="mono">{shortJobId(f.job_uuid)}</td>
                <td>{f.event_type}</td>
                <td class="mono">{f.url}</td>
                <td>{f.attempts}</td>
                <td>{f.last_status ?? f.last_error ?? '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function Operator({ token, onToken }: { token: string | null; onToken: (t: string | null) => void }) {
  const [error, setError] = useState<string | null>(null);
  const { data, load } = useOperatorData(token, setError);
  if (!token) return <OperatorSignIn onToken={onToken} />;
  return (
    <section>
      <h1 tabIndex={-1}>Operator</h1>
      <ErrorNote error={error} />
      <QueueStats overview={data.overview} />
      <WorkersTable workers={data.workers} />
      <Keys keys={data.keys} reload={load} setError={setError} />
      <DisabledEndpoints disabled={data.disabled} />
      <FailedDeliveries failed={data.failed} />
    </section>
  );
}
