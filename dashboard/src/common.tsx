import { useEffect, useState } from 'preact/hooks';
import { isTerminalStatus } from '../../src/contract/api.js';
import { api, type Job, type JobType } from './api';

/** A help text with its `code` spans (the catalogue's descriptions are Markdown-like) as <code>. */
export function Prose({ text: t }: { text: string }) {
  return <>{t.split(/`([^`]*)`/).map((part, i) => (i % 2 === 1 ? <code>{part}</code> : part))}</>;
}

/** An error's message for the page (whatever was thrown). */
export const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export function Status({ status }: { status: string }) {
  return <span class={`status status-${status}`}>{status}</span>;
}

/** The job's structured progress as a bar (indeterminate when the stage has no percentage). */
export function ProgressBar({ job }: { job: Job }) {
  const p = job.progress;
  if (!p || isTerminalStatus(job.status)) return null;
  const label = `${p.stage}${p.percent === null ? '' : ` ${Math.round(p.percent)}%`}`;
  return (
    <span class="progress">
      {p.percent === null ? (
        <progress aria-label={label} />
      ) : (
        <progress max={100} value={p.percent} aria-label={label} />
      )}{' '}
      <span class="progress-label">{label}</span>
    </span>
  );
}

export function ErrorNote({ error }: { error: string | null }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

/** The job types of GET /job-types (empty until they arrive, or when the call fails). */
export function useJobTypes(): JobType[] {
  const [types, setTypes] = useState<JobType[]>([]);
  useEffect(() => {
    api<{ job_types: JobType[] }>('/job-types').then(
      (d) => setTypes(d.job_types),
      () => {},
    );
  }, []);
  return types;
}

/**
 * Runs an action with the page's busy flag set, its error shown on failure: the one shape of every
 * button that calls the API.
 */
export function useAction(setError: (e: string | null) => void): {
  busy: boolean;
  run: (action: () => Promise<void>) => Promise<void>;
} {
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<void>) => {
    setBusy(true);
    try {
      await action();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return { busy, run };
}
