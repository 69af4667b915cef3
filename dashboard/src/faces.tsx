import { useEffect, useState } from 'preact/hooks';
import { WAITING_FOR_WORKER, isTerminalStatus, shortJobId, type ResultLink } from '../../src/contract/api.js';
import { api, type Job } from './api';

/**
 * face-detect's JSON result: the faces left to right, whether the swap would take each (`swappable`
 * false with a `reason` when not; absent from older services: then every face is offered), and (from
 * this service) a preview of the picture and a thumbnail per face as data: URIs, which the page's CSP
 * allows.
 */
interface Detection {
  width: number;
  height: number;
  preview?: string;
  faces: {
    index: number;
    box: { x: number; y: number; width: number; height: number };
    score: number;
    swappable?: boolean;
    reason?: string;
    /** Whether the swap takes the face as its source (`source_reason` when not); absent from older services. */
    usable_as_source?: boolean;
    source_reason?: string;
    thumbnail?: string;
  }[];
}

/**
 * Runs a face-detect job on `url` and returns its result. Polls the status once a second and
 * reports it, so a detection waiting behind other jobs says so rather than looking stuck.
 */
async function detectFaces(
  url: string,
  minConfidence: number | undefined,
  signal: AbortSignal,
  onStatus: (job: Job) => void,
): Promise<Detection> {
  const input: Record<string, unknown> = { target: url };
  if (minConfidence !== undefined) input.min_confidence = minConfidence;
  const job = await api<Job>('/jobs/submit/face-detect', {
    method: 'POST',
    body: { job_type: 'face-detect', model: 'ssd-landmarks68-v1', input },
  });
  for (;;) {
    const s = await api<Job & { error_message?: string | null }>(`/jobs/${job.uuid}/status`);
    onStatus(s);
    if (isTerminalStatus(s.status)) {
      if (s.status !== 'completed') throw new Error(s.error_message ?? `face detection ${s.status}`);
      break;
    }
    await new Promise((r) => setTimeout(r, 1000));
    if (signal.aborted) throw new Error('cancelled');
  }
  const link = await api<ResultLink>(`/jobs/${job.uuid}/result`);
  const res = await fetch(link.url, { credentials: 'omit', signal });
  if (!res.ok) throw new Error(`result: HTTP ${res.status}`);
  return (await res.json()) as Detection;
}

/** What each picker sets and says: `target` picks any number of faces, `source` one. */
const PICKERS = {
  target: {
    title: 'Faces to replace',
    option: 'target_face_indices',
    multiple: true,
    unset: 'none ticked: the faces option decides',
    picked: 'replacing',
  },
  source: {
    title: 'Face to put in',
    option: 'source_face_index',
    multiple: false,
    unset: 'none ticked: the largest is used',
    picked: 'putting in',
  },
} as const;

type Kind = (typeof PICKERS)[keyof typeof PICKERS];
type Face = Detection['faces'][number];

/** face-detect's reasons in words; a reason this page does not know is shown as the service sent it. */
const REASONS: Record<string, string> = {
  profile: 'in profile (turned too far)',
  small: 'too small',
  eyes: 'eyes not showing (closed, lowered or in shadow)',
};

/** The source picker judges faces as sources: face-detect's source flags in place of the target ones. */
function asSources(d: Detection): Detection {
  const faces = d.faces.map((f) =>
    f.usable_as_source === undefined ? f : { ...f, swappable: f.usable_as_source, reason: f.source_reason },
  );
  return { ...d, faces };
}

/** Why the swap would refuse face `f` (it cannot be picked), or null when it would take it. */
function refusal(f: Face): string | null {
  if (f.swappable !== false) return null;
  return `${f.reason ? (REASONS[f.reason] ?? f.reason) : 'refused'}: the swap cannot take it`;
}

/** What the picker says under its button: the detection's progress, a stale pick, or what was found. */
function statusLine(p: {
  slot: string;
  kind: Kind;
  busy: boolean;
  progress: Job | null;
  stale: boolean;
  d: Detection | null;
  minConfidence: number | undefined;
  selected: Set<number>;
}): string | null {
  if (p.busy) {
    const job = p.progress;
    const waiting = job?.status === 'queued' ? ` (${WAITING_FOR_WORKER})` : '';
    return `Finding faces: face-detect job ${job ? `${shortJobId(job.uuid)} ${job.status}${waiting}` : 'submitted'}…`;
  }
  if (p.stale)
    return `The ${p.slot} or min_confidence changed since the faces were found (the picks are cleared): find them again.`;
  if (!p.d) return null;
  if (p.d.faces.length === 0)
    return `No face found in the ${p.slot} (min_confidence ${p.minConfidence}). A lower min_confidence finds more.`;
  const n = p.d.faces.length;
  const refused = p.d.faces.filter((f) => refusal(f) !== null).length;
  const found = `${n} ${n === 1 ? 'face' : 'faces'} found${refused ? ` (${refused} the swap cannot take)` : ''}`;
  const picks = p.selected.size ? `${p.kind.picked} ${[...p.selected].join(', ')}` : p.kind.unset;
  return `${found}; ${picks}.`;
}

/** The picture with each face boxed and numbered; a click on a box ticks the face. */
function FacePreview(props: {
  d: Detection;
  url: string;
  slot: string;
  selected: Set<number>;
  toggle: (i: number) => void;
}) {
  const { d } = props;
  // Labels sit above each box, inside the frame even for a face at the top edge.
  const size = Math.max(d.width, d.height) * 0.055;
  return (
    <div class="face-preview">
      <svg viewBox={`0 0 ${d.width} ${d.height}`} aria-hidden="true">
        {d.preview && <image href={d.preview} x={0} y={0} width={d.width} height={d.height} />}
        {d.faces.map((f) => (
          <g class={faceClass('face', f, props.selected)} data-index={f.index} onClick={() => props.toggle(f.index)}>
            <title>{`face ${f.index}${refusal(f) ? `: ${refusal(f)}` : ''}`}</title>
            <rect x={f.box.x} y={f.box.y} width={f.box.width} height={f.box.height} />
            <text
              x={f.box.x + f.box.width / 2}
              y={Math.max(f.box.y - size * 0.25, size)}
              font-size={size}
              stroke-width={size * 0.15}
            >
              {f.index}
            </text>
          </g>
        ))}
      </svg>
      {!d.preview && (
        <small class="hint">
          A map of the picture (this service sent no preview):{' '}
          <a href={props.url} target="_blank" rel="noreferrer noopener">
            open the {props.slot} image
          </a>{' '}
          to compare.
        </small>
      )}
    </div>
  );
}

/** `base`, plus `selected` when the face is picked and `refused` when the swap cannot take it. */
function faceClass(base: string, f: Face, selected: Set<number>): string {
  return [base, selected.has(f.index) && 'selected', refusal(f) && 'refused'].filter(Boolean).join(' ');
}

/** One checkbox per face; a face the swap refuses has its box disabled and says why. */
function FaceList(props: { faces: Face[]; selected: Set<number>; toggle: (i: number) => void }) {
  return (
    <div class="face-list">
      {props.faces.map((f) => {
        const why = refusal(f);
        return (
          <label class={faceClass('check face-choice', f, props.selected)}>
            <input
              type="checkbox"
              checked={props.selected.has(f.index)}
              disabled={why !== null && !props.selected.has(f.index)}
              onChange={() => props.toggle(f.index)}
            />
            {f.thumbnail && <img src={f.thumbnail} alt={`face ${f.index}`} width={64} height={64} />}
            <span>
              face {f.index} <span class="hint">score {f.score.toFixed(2)}</span>
              {why && <span class="refusal">{why}</span>}
            </span>
          </label>
        );
      })}
    </div>
  );
}

/**
 * A face-detect run for one picture and one min_confidence (`key`). Indices belong to that pair: when
 * either changes (also when a detection ends after it changed), the result and the picks are dropped.
 */
function useDetection(key: string, url: string, minConfidence: number | undefined, clearPicks: () => void) {
  const [found, setFound] = useState<{ key: string; detection: Detection } | null>(null);
  const [busy, setBusy] = useState<AbortController | null>(null);
  const [progress, setProgress] = useState<Job | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [stale, setStale] = useState(false);
  useEffect(() => () => busy?.abort(), [busy]);
  useEffect(() => {
    if (!found || found.key === key) return;
    setFound(null);
    setError(null);
    clearPicks();
    setStale(true);
  }, [key, found]);
  const run = async () => {
    const ctl = new AbortController();
    setBusy(ctl);
    setError(null);
    setStale(false);
    setProgress(null);
    setFound(null);
    clearPicks();
    try {
      setFound({ key, detection: await detectFaces(url, minConfidence, ctl.signal, setProgress) });
    } catch (err) {
      if (!ctl.signal.aborted) setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(null);
    }
  };
  const detection = found?.key === key ? found.detection : null;
  return { detection, busy: busy !== null, progress, error, stale, run };
}

/**
 * Picks faces of the `target` (`target_face_indices`) or `source` (`source_face_index`) image from a
 * face-detect run on it: the picture (the detection's preview, each face boxed and numbered left to
 * right; the page never loads the submitted URL itself, its CSP forbids that) and one checkbox per
 * face with the face's thumbnail. No face ticked means "not set".
 */
export function FacePicker({
  slot,
  url,
  minConfidence,
  value,
  onChange,
  conflict,
}: {
  slot: keyof typeof PICKERS;
  url: string;
  /** The form's min_confidence, else the job type's default (the detection must use the swap's). */
  minConfidence: number | undefined;
  value: number[] | undefined;
  onChange: (v: number[] | undefined) => void;
  /** Why picked faces would fail the job as the form stands (another option excludes them), if so. */
  conflict: string | null;
}) {
  const kind = PICKERS[slot];
  const {
    detection: found,
    busy,
    progress,
    error,
    stale,
    run,
  } = useDetection(`${minConfidence} ${url}`, url, minConfidence, () => value && onChange(undefined));
  const d = found && slot === 'source' ? asSources(found) : found;
  const selected = new Set(value ?? []);
  const toggle = (i: number) => {
    const face = d?.faces.find((f) => f.index === i);
    // A face the swap refuses cannot be ticked (one typed into the option can still be unticked).
    if (face && refusal(face) && !selected.has(i)) return;
    const next = new Set(kind.multiple ? selected : []);
    if (selected.has(i)) next.delete(i);
    else next.add(i);
    onChange(next.size ? [...next].sort((a, b) => a - b) : undefined);
  };
  const status = statusLine({ slot, kind, busy, progress, stale, d, minConfidence, selected });
  // Picked faces the swap would refuse (typed into the option by hand): the job would fail.
  const refusedPicks = (d?.faces ?? []).filter((f) => selected.has(f.index) && refusal(f));
  return (
    <div class="field face-picker" data-slot={slot} role="group" aria-labelledby={`face-picker-${slot}-h`}>
      <span id={`face-picker-${slot}-h`} class="label">
        {kind.title}
      </span>
      <small class="hint">
        Runs a face-detect job on the {slot} image, then shows where its faces are, numbered left to right (0 =
        leftmost); tick {kind.multiple ? 'the ones' : 'the one'} to use (this sets {kind.option}).
      </small>
      <button type="button" class="secondary" onClick={() => void run()} disabled={!url || busy}>
        {busy ? 'Finding faces…' : d ? `Find faces in the ${slot} again` : `Find faces in the ${slot}`}
      </button>
      {!url && <small class="hint">Fill in the {slot} URL first.</small>}
      <p class="face-status" role="status">
        {status}
      </p>
      {error && (
        <p class="error" role="alert">
          Face detection failed: {error}
        </p>
      )}
      {d && d.faces.length > 0 && (
        <>
          <FacePreview d={d} url={url} slot={slot} selected={selected} toggle={toggle} />
          <FaceList faces={d.faces} selected={selected} toggle={toggle} />
          {selected.size > 0 && conflict && (
            <p class="error" role="alert">
              {conflict}
            </p>
          )}
          {refusedPicks.map((f) => (
            <p class="error" role="alert">
              Face {f.index} is {refusal(f)}: the job would fail. Untick it.
            </p>
          ))}
        </>
      )}
    </div>
  );
}
