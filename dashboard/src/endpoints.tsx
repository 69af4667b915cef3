import { useEffect, useState } from 'preact/hooks';
import { shortJobId } from '../../src/contract/api.js';
import {
  EVENT_TYPES,
  type EndpointDelivery,
  type EventType,
  type WebhookEndpoint,
} from '../../src/contract/webhook.js';
import { api, when } from './api';
import { ErrorNote, errorText } from './common';

/** Checkboxes for the three event types. */
function EventPicker({
  name,
  value,
  onChange,
}: {
  name: string;
  value: EventType[];
  onChange: (v: EventType[]) => void;
}) {
  return (
    <fieldset class="events">
      <legend>Events</legend>
      {EVENT_TYPES.map((e) => (
        <label>
          <input
            type="checkbox"
            name={name}
            checked={value.includes(e)}
            onChange={(ev) => onChange(ev.currentTarget.checked ? [...value, e] : value.filter((x) => x !== e))}
          />{' '}
          {e}
        </label>
      ))}
    </fieldset>
  );
}

type Act = (what: () => Promise<string | undefined>) => Promise<void>;

/** The endpoint's event filter, saved with PATCH. */
function EventsForm({ ep, act }: { ep: WebhookEndpoint; act: Act }) {
  const [events, setEvents] = useState<EventType[]>(ep.events);
  const save = (e: Event) => {
    e.preventDefault();
    void act(async () => {
      await api(`/webhook-endpoints/${ep.id}`, { method: 'PATCH', body: { events } });
      return 'events saved';
    });
  };
  return (
    <form onSubmit={save}>
      <EventPicker name={`events-${ep.id}`} value={events} onChange={setEvents} />
      <button type="submit" disabled={events.length === 0}>
        Save events
      </button>
    </form>
  );
}

function EndpointActions({ ep, act }: { ep: WebhookEndpoint; act: Act }) {
  const path = `/webhook-endpoints/${ep.id}`;
  const rotate = () =>
    act(async () => {
      const r = await api<{ secret: string }>(`${path}/rotate-secret`, { method: 'POST' });
      return `new secret ${r.secret}; the old one also signs for the overlap`;
    });
  const enable = () => act(() => api(`${path}/enable`, { method: 'POST' }).then(() => 'enabled'));
  const remove = () =>
    confirm(`Delete the endpoint ${ep.url}?`) && void act(() => api(path, { method: 'DELETE' }).then(() => 'deleted'));
  return (
    <div class="actions">
      <button type="button" class="secondary" onClick={() => void rotate()}>
        Rotate secret
      </button>
      {ep.status === 'disabled' && (
        <button type="button" onClick={() => void enable()}>
          Enable
        </button>
      )}
      <button type="button" class="secondary" onClick={remove}>
        Delete
      </button>
    </div>
  );
}

/** "Recover since T": re-queues each failed or skipped delivery since then. */
function RecoverForm({ ep, act }: { ep: WebhookEndpoint; act: Act }) {
  const [since, setSince] = useState('');
  const recover = (e: Event) => {
    e.preventDefault();
    void act(async () => {
      const r = await api<{ count: number }>(`/webhook-endpoints/${ep.id}/recover`, {
        method: 'POST',
        body: { since: new Date(since).toISOString() },
      });
      return `${r.count} deliveries queued again`;
    });
  };
  return (
    <form class="filters" onSubmit={recover}>
      <div>
        <label for={`since-${ep.id}`}>Recover failed and skipped deliveries since</label>
        <input
          id={`since-${ep.id}`}
          type="datetime-local"
          required
          value={since}
          onInput={(e) => setSince(e.currentTarget.value)}
        />
      </div>
      <button type="submit">Recover</button>
    </form>
  );
}

function RecentDeliveries({ deliveries }: { deliveries: EndpointDelivery[] }) {
  if (deliveries.length === 0) return <p>None yet.</p>;
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Created</th>
          <th scope="col">Event</th>
          <th scope="col">Job</th>
          <th scope="col">State</th>
          <th scope="col">Attempts</th>
          <th scope="col">Last answer</th>
        </tr>
      </thead>
      <tbody>
        {deliveries.map((d) => {
          const last = d.attempts.at(-1);
          return (
            <tr>
              <td>{when(d.created_at)}</td>
              <td>{d.event_type}</td>
              <td class="mono">
                <a href={`#/jobs/${d.job_uuid}`}>{shortJobId(d.job_uuid)}</a>
              </td>
              <td>
                <span class={`status state-${d.state}`}>{d.state}</span>
              </td>
              <td>{d.attempts.length}</td>
              <td>{last ? (last.http_status ?? last.error ?? '—') : '—'}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** One endpoint: its settings, its actions and its recent deliveries. */
function EndpointCard({ ep, onChange }: { ep: WebhookEndpoint; onChange: () => void }) {
  const [note, setNote] = useState<string | null>(null);
  const [deliveries, setDeliveries] = useState<EndpointDelivery[]>([]);
  const act: Act = async (what) => {
    try {
      const said = await what();
      setNote(said ?? null);
      onChange();
    } catch (err) {
      setNote(errorText(err));
    }
  };
  useEffect(() => {
    api<{ deliveries: EndpointDelivery[] }>(`/webhook-endpoints/${ep.id}/deliveries?limit=10`)
      .then((d) => setDeliveries(d.deliveries))
      .catch((err: unknown) => setNote(errorText(err)));
  }, [ep.id, ep.updated_at]);
  return (
    <article class="endpoint" aria-label={ep.url}>
      <div class="endpoint-head">
        <h2 class="mono">{ep.url}</h2>
        <span class={`status endpoint-${ep.status}`}>{ep.status}</span>
      </div>
      {ep.disabled_reason && (
        <p class="disabled-reason">
          Disabled {when(ep.disabled_at)}: {ep.disabled_reason}
        </p>
      )}
      <p class="meta">
        <span class="mono">{ep.id}</span>
        {ep.description ? ` · ${ep.description}` : ''}
      </p>
      <p>
        Secret: <code>{ep.secret}</code>
      </p>
      <EventsForm ep={ep} act={act} />
      <EndpointActions ep={ep} act={act} />
      <RecoverForm ep={ep} act={act} />
      {note && <p role="status">{note}</p>}
      <h3>Recent deliveries</h3>
      <RecentDeliveries deliveries={deliveries} />
    </article>
  );
}

/** #/endpoints: the signed-in owner's webhook endpoints. */
export function Endpoints() {
  const [list, setList] = useState<WebhookEndpoint[] | null>(null);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<EventType[]>([...EVENT_TYPES]);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<{ endpoints: WebhookEndpoint[] }>('/webhook-endpoints')
      .then((d) => {
        setList(d.endpoints);
        setError(null);
      })
      .catch((err: unknown) => setError(errorText(err)));
  useEffect(() => {
    void load();
  }, []);
  return (
    <section>
      <h1 tabIndex={-1}>Webhook endpoints</h1>
      <p>Every subscribed event of all your jobs is sent to each enabled endpoint, signed with its secret.</p>
      <form
        class="add-endpoint"
        onSubmit={(e) => {
          e.preventDefault();
          api('/webhook-endpoints', { method: 'POST', body: { url, events } })
            .then(() => {
              setUrl('');
              return load();
            })
            .catch((err: unknown) => setError(errorText(err)));
        }}
      >
        <h2>Add an endpoint</h2>
        <div>
          <label for="endpoint-url">URL</label>
          <input id="endpoint-url" type="url" required value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
        </div>
        <EventPicker name="new-events" value={events} onChange={setEvents} />
        <button type="submit" disabled={events.length === 0}>
          Add endpoint
        </button>
      </form>
      <ErrorNote error={error} />
      {list?.length === 0 && <p>No endpoints yet.</p>}
      {list?.map((ep) => (
        <EndpointCard ep={ep} key={ep.id} onChange={() => void load()} />
      ))}
    </section>
  );
}
