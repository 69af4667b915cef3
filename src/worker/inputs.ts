import type { Dispatcher } from 'undici';
import type { Config } from '../config.js';
import { JobError } from '../errors.js';
import { fetchMedia, type IsPublic, type LookupAll } from '../media/index.js';
import { mediaFits, type FetchedMedia, type JobType } from '../processors/types.js';
import { SLOT_NAMES, type SlotName } from '../contract/api.js';

export interface InputFetchOptions {
  config: Config;
  signal: AbortSignal;
  dispatcher: Dispatcher;
  lookup?: LookupAll | undefined;
  isPublic?: IsPublic | undefined;
}

/**
 * Downloads every filled media slot of a job's input under the URL policy, checking each file is
 * the kind of media its slot accepts. The one place both in-process workers and remote-job
 * staging fetch a client's media: a failure is a JobError naming the field.
 */
export async function fetchInputs(
  type: JobType,
  input: Record<string, unknown>,
  opts: InputFetchOptions,
): Promise<Partial<Record<SlotName, FetchedMedia[]>>> {
  const { config } = opts;
  const jobs: Array<Promise<[SlotName, number, FetchedMedia]>> = [];
  for (const slot of SLOT_NAMES) {
    const spec = type.slots[slot];
    const urls = input[slot] as string[] | undefined;
    if (!spec || !urls) continue;
    urls.forEach((url, i) => {
      const field = urls.length > 1 ? `input.${slot}[${i}]` : `input.${slot}`;
      jobs.push(
        fetchMedia(url, {
          allowPrivate: config.mediaAllowPrivateNetworks,
          maxBytes: config.maxMediaBytes,
          timeoutMs: config.mediaFetchTimeoutMs,
          signal: opts.signal,
          lookup: opts.lookup,
          isPublic: opts.isPublic,
          dispatcher: opts.dispatcher,
        }).then(
          (m) => {
            if (!mediaFits(spec.accepts, m.mime)) {
              throw new JobError(
                'invalid_media',
                `${field}: not ${spec.accepts === 'image' ? 'an' : 'a'} ${spec.accepts} file (detected ${m.mime ?? 'unknown data'})`,
              );
            }
            return [slot, i, m] as [SlotName, number, FetchedMedia];
          },
          (err: unknown) => {
            if (err instanceof JobError) throw new JobError(err.errorType, `${field}: ${err.message}`);
            throw err;
          },
        ),
      );
    });
  }
  const media: Partial<Record<SlotName, FetchedMedia[]>> = {};
  for (const [slot, i, m] of await Promise.all(jobs)) (media[slot] ??= [])[i] = m;
  return media;
}

/** True when the input has any media to fetch. */
export function hasMedia(type: JobType, input: Record<string, unknown>): boolean {
  return SLOT_NAMES.some((s) => type.slots[s] && Array.isArray(input[s]) && (input[s] as unknown[]).length > 0);
}
