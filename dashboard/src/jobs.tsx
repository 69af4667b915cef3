import { useEffect, useState } from 'preact/hooks';
import { JOB_STATUSES, isTerminalStatus, shortJobId } from '../../src/contract/api.js';
import { api, when, type Job, type JobType } from './api';
import { ErrorNote, ProgressBar, Status, errorText, useJobTypes } from './common';

const PAGE = 20;

interface JobsPage {
  jobs: Job[];
  next_cursor: string | null;
}

/** One page of the owner's jobs, read again every 3 s while the tab is visible (one request, one page). */
function useJobsPage(status: string, jobType: string, cursor: string | undefined) {
  const [page, setPage] = useState<JobsPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let stop = false;
    const load = async () => {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (status) q.set('status', status);
      if (jobType) q.set('job_type', jobType);
      if (cursor) q.set('cursor', cursor);
      try {
        const data = await api<JobsPage>(`/jobs?${q}`);
        if (!stop) {
          setPage(data);
          setError(null);
        }
      } catch (err) {
        if (!stop) setError(errorText(err));
      }
    };
    void load();
    const timer = setInterval(() => document.visibilityState === 'visible' && void load(), 3000);
    return () => {
      stop = true;
      clearInterval(timer);
    };
  }, [status, jobType, cursor]);
  return { page, error };
}

function Filters(props: {
  types: JobType[];
  status: string;
  jobType: string;
  onStatus: (e: Event) => void;
  onJobType: (e: Event) => void;
}) {
  return (
    <form class="filters" onSubmit={(e) => e.preventDefault()}>
      <div>
        <label for="filter-status">Status</label>
        <select id="filter-status" value={props.status} onChange={props.onStatus}>
          <option value="">any</option>
          {JOB_STATUSES.map((s) => (
            <option value={s}>{s}</option>
          ))}
        </select>
      </div>
      <div>
        <label for="filter-type">Job type</label>
        <select id="filter-type" value={props.jobType} onChange={props.onJobType}>
          <option value="">any</option>
          {props.types.map((t) => (
            <option value={t.name}>{t.name}</option>
          ))}
        </select>
      </div>
    </form>
  );
}

function JobRow({ job: j }: { job: Job }) {
  return (
    <tr data-uuid={j.uuid}>
      <td>
        <a href={`#/jobs/${j.uuid}`} class="mono">
          {shortJobId(j.uuid)}
        </a>
      </td>
      <td>{j.job_type}</td>
      <td>
        <Status status={j.status} />
        {j.error_type && <span class="error-type">{j.error_type}</span>}
      </td>
      <td>
        {j.error_message ?? j.status_detail}
        {j.progress && !isTerminalStatus(j.status) && (
          <>
            <br />
            <ProgressBar job={j} />
          </>
        )}
      </td>
      <td>{when(j.created_at)}</td>
    </tr>
  );
}

function JobsTable({ jobs }: { jobs: Job[] }) {
  return (
    <table>
      <caption class="visually-hidden">Your jobs, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Job</th>
          <th scope="col">Type</th>
          <th scope="col">Status</th>
          <th scope="col">Detail</th>
          <th scope="col">Created</th>
        </tr>
      </thead>
      <tbody>
        {jobs.map((j) => (
          <JobRow job={j} />
        ))}
      </tbody>
    </table>
  );
}

function Pager(props: { pageNumber: number; onPrevious?: () => void; onNext?: () => void }) {
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" class="secondary" disabled={!props.onPrevious} onClick={props.onPrevious}>
        Previous page
      </button>
      <span aria-live="polite">Page {props.pageNumber}</span>
      <button type="button" class="secondary" disabled={!props.onNext} onClick={props.onNext}>
        Next page
      </button>
    </nav>
  );
}

export function Jobs() {
  const types = useJobTypes();
  const [status, setStatus] = useState('');
  const [jobType, setJobType] = useState('');
  // Cursors of the pages before this one, so "Previous" works without counting rows.
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const { page, error } = useJobsPage(status, jobType, cursors[cursors.length - 1]);
  const filter = (set: (v: string) => void) => (e: Event) => {
    set((e.currentTarget as HTMLSelectElement).value);
    setCursors([undefined]);
  };
  const next = page?.next_cursor;
  return (
    <section>
      <h1 tabIndex={-1}>Jobs</h1>
      <Filters
        types={types}
        status={status}
        jobType={jobType}
        onStatus={filter(setStatus)}
        onJobType={filter(setJobType)}
      />
      <ErrorNote error={error} />
      <JobsTable jobs={page?.jobs ?? []} />
      {page && page.jobs.length === 0 && (
        <p>
          No jobs here yet. <a href="#/new">Submit one</a>.
        </p>
      )}
      <Pager
        pageNumber={cursors.length}
        onPrevious={cursors.length < 2 ? undefined : () => setCursors(cursors.slice(0, -1))}
        onNext={next ? () => setCursors([...cursors, next]) : undefined}
      />
    </section>
  );
}
