import { useEffect, useState } from 'preact/hooks';
import { api, isTerminal, type Job, type ResultLink } from './api';

/** face-detect's JSON result (DESIGN section 8). */
interface Detection {
  width: number;
  height: number;
  faces: { index: number; box: { x: number; y: number; width: number; height: number }; score: number }[];
}

/** Runs a face-detect job on `url` and returns its result. Polls the status once a second. */
async function detectFaces(url: string, minConfidence: number | undefined, signal: AbortSignal): Promise<Detection> {
  const input: Record<string, unknown> = { target: url };
  if (minConfidence !== undefined) input.min_confidence = minConfidence;
  const job = await api<Job>('/jobs/submit/face-detect', {
    method: 'POST',
    body: { job_type: 'face-detect', model: 'ssd-landmarks68-v1', input },
  });
  for (;;) {
    const s = await api<Job & { error_message?: string | null }>(`/jobs/${job.uuid}/status`);
    if (isTerminal(s.status)) {
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

/**
 * Picks `target_face_indices` from a face-detect run on the target image: a map of the picture (its
 * frame, each face boxed and numbered; the page never loads the URL itself, its CSP forbids that)
 * and one checkbox per face. No face ticked means "not set" (the job's `faces` mode).
 */
export function FacePicker({
  url,
  minConfidence,
  value,
  onChange,
}: {
  url: string;
  minConfidence: number | undefined;
  value: number[] | undefined;
  onChange: (v: number[] | undefined) => void;
}) {
  const [found, setFound] = useState<{ url: string; detection: Detection } | null>(null);
  const [busy, setBusy] = useState<AbortController | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => () => busy?.abort(), [busy]);
  const selected = new Set(value ?? []);
  const toggle = (i: number) => {
    const next = new Set(selected);
    if (next.has(i)) next.delete(i);
    else next.add(i);
    onChange(next.size ? [...next].sort((a, b) => a - b) : undefined);
  };
  const run = async () => {
    const ctl = new AbortController();
    setBusy(ctl);
    setError(null);
    onChange(undefined);
    try {
      setFound({ url, detection: await detectFaces(url, minConfidence, ctl.signal) });
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(null);
    }
  };
  const d = found?.url === url ? found.detection : null;
  return (
    <div class="field face-picker">
      <span class="label">Faces to replace</span>
      <button type="button" onClick={() => void run()} disabled={!url || busy !== null}>
        {busy ? 'Finding faces…' : 'Find faces in the target'}
      </button>
      <small class="hint">
        Runs a face-detect job on the target image; tick the faces to replace (sets target_face_indices).
      </small>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {d && d.faces.length === 0 && <p>No face found in the target.</p>}
      {d && d.faces.length > 0 && (
        <>
          <div class="face-preview">
            <svg viewBox={`0 0 ${d.width} ${d.height}`} aria-hidden="true">
              {d.faces.map((f) => (
                <g class={selected.has(f.index) ? 'face selected' : 'face'} onClick={() => toggle(f.index)}>
                  <rect x={f.box.x} y={f.box.y} width={f.box.width} height={f.box.height} />
                  <text x={f.box.x + f.box.width / 2} y={f.box.y - d.height * 0.01} font-size={d.height * 0.04}>
                    {f.index}
                  </text>
                </g>
              ))}
            </svg>
          </div>
          <div class="face-list">
            {d.faces.map((f) => (
              <label class="check">
                <input type="checkbox" checked={selected.has(f.index)} onChange={() => toggle(f.index)} /> face{' '}
                {f.index} (score {f.score.toFixed(2)})
              </label>
            ))}
          </div>
        </>
      )}
    </div>
  );
}
