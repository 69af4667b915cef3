import { useEffect, useState } from 'preact/hooks';
import { isSlotName, isTerminalStatus, type ResultLink } from '../../src/contract/api.js';
import type { Delivery } from '../../src/contract/webhook.js';
import { api, ApiError, watchJob, when, type Job, type JobDetail, type JobType } from './api';
import { ErrorNote, ProgressBar, Status, errorText, useAction, useJobTypes } from './common';

interface Step {
  at: string;
  what: string;
}

/** The job's webhook deliveries, refreshed every second while one is pending (retries move on their own). */
function useDeliveries(uuid: string) {
  const [deliveries, setDeliveries] = useState<Delivery[]>([]);
  const load = () =>
    api<{ deliveries: Delivery[] }>(`/jobs/${uuid}/webhook-deliveries`).then(
      (d) => setDeliveries(d.deliveries),
      () => {},
    );
  useEffect(() => {
    void load();
  }, [uuid]);
  useEffect(() => {
    if (!deliveries.some((d) => d.state === 'pending')) return;
    const t = setTimeout(() => void load(), 1000);
    return () => clearTimeout(t);
  }, [deliveries]);
  return { deliveries, reload: load };
}

/**
 * The job, live: every change seen while this page is open becomes a step, stamped when it was seen.
 * The state the page opened with is not a step (created, started and finished carry their own times),
 * nor is the terminal state (its line is "finished", at finished_at).
 */
function useLiveJob(uuid: string, onFinished: () => void) {
  const [job, setJob] = useState<JobDetail | null>(null);
  const [steps, setSteps] = useState<Step[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const ctrl = new AbortController();
    api<JobDetail>(`/jobs/${uuid}`).then(
      (detail) => {
        setJob(detail);
        let last = `${detail.status}: ${detail.status_detail}`;
        const seen = (j: Job, kind: string) => {
          setJob((prev) => (prev ? { ...prev, ...j } : prev));
          const what = `${j.status}: ${j.status_detail}`;
          if (what !== last && !isTerminalStatus(j.status))
            setSteps((s) => [...s, { at: new Date().toISOString(), what }]);
          last = what;
          if (kind === 'status' && isTerminalStatus(j.status)) onFinished();
        };
        void watchJob(uuid, seen, ctrl.signal);
      },
      (err: unknown) =>
        setError(err instanceof ApiError && err.status === 404 ? 'No such job (or not yours).' : errorText(err)),
    );
    return () => ctrl.abort();
  }, [uuid]);
  return { job, setJob, steps, error, setError };
}

/**
 * A preview of media this service serves (a result on its own origin), or nothing. The page never
 * makes the browser fetch a URL a client supplied (the CSP's img-src and media-src are 'self'):
 * inputs are plain links, and results stored elsewhere (S3) get only their download link.
 */
function Media({ url, kind, label }: { url: string; kind: string; label: string }) {
  if (new URL(url, location.href).origin !== location.origin)
    return <p class="hint">No preview here (the file is on another address): use the link.</p>;
  if (kind.startsWith('image')) return <img src={url} alt={label} loading="lazy" />;
  if (kind.startsWith('video')) return <video src={url} controls preload="metadata" aria-label={label} />;
  if (kind.startsWith('audio')) return <audio src={url} controls preload="metadata" aria-label={label} />;
  return null;
}

function Summary({ job }: { job: JobDetail }) {
  return (
    <>
      <p class="summary">
        <Status status={job.status} />{' '}
        <span id="job-detail" aria-live="polite">
          {job.status_detail}
        </span>{' '}
        · {job.job_type} · {job.model}
        {job.priority !== 0 && ` · priority ${job.priority}`}
        {job.deadline && ` · deadline ${when(job.deadline)}`}
      </p>
      {/* The bar and the buttons on lines of their own: a button never sits against the label. */}
      {job.progress && !isTerminalStatus(job.status) && (
        <div class="job-progress">
          <ProgressBar job={job} />
        </div>
      )}
    </>
  );
}

function Actions(props: { job: JobDetail; busy: boolean; onCancel: () => void; onRemove: () => void }) {
  const terminal = isTerminalStatus(props.job.status);
  return (
    <>
      <div class="actions">
        {!terminal && (
          <button type="button" class="danger" onClick={props.onCancel} disabled={props.busy}>
            Cancel job
          </button>
        )}
        {terminal && !props.job.data_removed && (
          <button type="button" class="danger" onClick={props.onRemove} disabled={props.busy}>
            Delete job data
          </button>
        )}
      </div>
      {props.job.data_removed && (
        <p class="note" role="status">
          This job's data (input, webhook, result) was deleted.
        </p>
      )}
    </>
  );
}

function Inputs({ job, type }: { job: JobDetail; type: JobType | undefined }) {
  const slots = Object.entries(job.input).filter(([k]) => type?.slots[k]);
  const options = Object.entries(job.input).filter(([k]) => !isSlotName(k));
  return (
    <section aria-labelledby="inputs-h">
      <h2 id="inputs-h">Inputs</h2>
      {slots.length > 0 && (
        <dl class="inputs">
          {slots.map(([slot, value]) => (
            <>
              <dt>{slot}</dt>
              {[value].flat().map((u) => (
                <dd>
                  {/* A link only: the browser fetches nothing the client supplied by itself. */}
                  <a class="mono" href={String(u)} rel="noreferrer noopener" target="_blank">
                    {String(u)}
                  </a>
                </dd>
              ))}
            </>
          ))}
        </dl>
      )}
      {options.length > 0 && (
        <dl>
          {options.map(([k, v]) => (
            <>
              <dt>{k}</dt>
              <dd class="mono">{JSON.stringify(v)}</dd>
            </>
          ))}
        </dl>
      )}
    </section>
  );
}

function Result({ result, terminal }: { result: ResultLink | null; terminal: boolean }) {
  return (
    <section aria-labelledby="result-h">
      <h2 id="result-h">Result</h2>
      {result ? (
        <figure>
          <Media url={result.url} kind={result.content_type} label="result" />
          <figcaption>
            {result.content_type}, {Math.round(result.size_bytes / 1024)} KiB ·{' '}
            <a href={result.url} download>
              Download result
            </a>
          </figcaption>
        </figure>
      ) : (
        <p>{terminal ? 'No result.' : 'Not ready yet.'}</p>
      )}
    </section>
  );
}

function Timeline({ job, steps }: { job: JobDetail; steps: Step[] }) {
  return (
    <section aria-labelledby="timeline-h">
      <h2 id="timeline-h">Timeline</h2>
      <ol class="timeline">
        <li>
          <time>{when(job.created_at)}</time> created
        </li>
        {job.started_at && (
          <li>
            <time>{when(job.started_at)}</time> started
          </li>
        )}
        {steps.map((s) => (
          <li>
            <time>{when(s.at)}</time> {s.what}
          </li>
        ))}
        {job.finished_at && (
          <li>
            <time>{when(job.finished_at)}</time> finished ({job.status})
          </li>
        )}
      </ol>
    </section>
  );
}

function DeliveryCard(props: { delivery: Delivery; busy: boolean; onRedeliver: () => void }) {
  const d = props.delivery;
  return (
    <article class="delivery" data-event={d.event_id}>
      <h3>
        {d.event_type} · <span class={`state-${d.state}`}>{d.state}</span>
      </h3>
      <table>
        <caption class="visually-hidden">Attempts of {d.event_type}</caption>
        <thead>
          <tr>
            <th scope="col">Attempt</th>
            <th scope="col">Started</th>
            <th scope="col">HTTP status</th>
            <th scope="col">Duration</th>
            <th scope="col">Outcome</th>
          </tr>
        </thead>
        <tbody>
          {d.attempts.map((a) => (
            <tr>
              <td>
                {a.attempt}
                {a.manual ? ' (redelivery)' : ''}
              </td>
              <td>{when(a.started_at)}</td>
              <td>{a.http_status ?? '—'}</td>
              <td>{a.duration_ms} ms</td>
              <td>{a.ok ? 'ok' : a.error}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <button type="button" class="secondary" onClick={props.onRedeliver} disabled={props.busy}>
        Redeliver {d.event_type}
      </button>
    </article>
  );
}

export function JobPage({ uuid }: { uuid: string }) {
  const types = useJobTypes();
  const { deliveries, reload } = useDeliveries(uuid);
  const { job, setJob, steps, error, setError } = useLiveJob(uuid, () => void reload());
  const [result, setResult] = useState<ResultLink | null>(null);
  const { busy, run } = useAction(setError);

  useEffect(() => {
    if (job?.result_ready && !result)
      api<ResultLink>(`/jobs/${uuid}/result`).then(setResult, (e: unknown) => setError(errorText(e)));
  }, [job?.result_ready]);

  const merge = (j: Job, removed?: Partial<JobDetail>) =>
    setJob((prev) => (prev ? { ...prev, ...j, ...removed } : prev));
  const cancel = () => run(async () => merge(await api<Job>(`/jobs/${uuid}/cancel`, { method: 'POST' })));
  const remove = () => {
    if (!confirm("Delete this job's data (result, input, webhook)? This cannot be undone.")) return;
    void run(async () => {
      merge(await api<Job>(`/jobs/${uuid}`, { method: 'DELETE' }), { input: {}, webhook: null });
      setResult(null);
    });
  };
  const redeliver = (eventId: string) =>
    run(async () => {
      await api(`/jobs/${uuid}/webhook-deliveries/${eventId}/redeliver`, { method: 'POST' });
      await reload();
    });

  if (!job)
    return (
      <section>
        <h1 tabIndex={-1}>Job</h1>
        {error ? <ErrorNote error={error} /> : <p>Loading…</p>}
      </section>
    );
  return (
    <section>
      <h1 tabIndex={-1}>
        Job <span class="mono">{job.uuid}</span>
      </h1>
      <Summary job={job} />
      <Actions job={job} busy={busy} onCancel={() => void cancel()} onRemove={remove} />
      <ErrorNote error={error} />
      {job.error_message && (
        <div class="error" role="status">
          <strong>{job.error_type}</strong>: {job.error_message}
        </div>
      )}
      <div class="grid">
        <Inputs job={job} type={types.find((t) => t.name === job.job_type)} />
        <Result result={result} terminal={isTerminalStatus(job.status)} />
      </div>
      <Timeline job={job} steps={steps} />
      <section aria-labelledby="hooks-h">
        <h2 id="hooks-h">Webhook deliveries</h2>
        {job.webhook ? <p class="mono">{job.webhook.url}</p> : <p>This job has no webhook.</p>}
        {deliveries.map((d) => (
          <DeliveryCard delivery={d} busy={busy} onRedeliver={() => void redeliver(d.event_id)} />
        ))}
      </section>
    </section>
  );
}
