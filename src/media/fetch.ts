/**
 * Downloads one media input safely: every hop is checked against the URL policy and connected
 * through the guarded agent, redirects are followed by hand (at most 5), and size and time are
 * bounded. The media type is sniffed from the bytes, never taken from Content-Type.
 *
 * Failures throw JobError('media_fetch_failed', 'download failed: …'); the caller prefixes the
 * slot ("input.source: download failed: HTTP 404"). A cancel through `signal` rethrows the
 * signal's reason unchanged.
 */
import { fileTypeFromBuffer } from 'file-type';
import { request, type Dispatcher } from 'undici';
import { JobError } from '../errors.js';
import { createGuardedAgent } from './guarded-agent.js';
import { describeNetworkError, formatDuration, networkErrorCode } from './net-errors.js';
import { checkUrlSyntax, REASON_PRIVATE, type IsPublic, type LookupAll } from './policy.js';

export interface FetchMediaOptions {
  allowPrivate: boolean;
  maxBytes: number;
  /** Bounds the whole download, every hop's headers and body included. */
  timeoutMs: number;
  maxRedirects?: number;
  signal?: AbortSignal;
  lookup?: LookupAll;
  isPublic?: IsPublic;
  /**
   * A shared guarded agent (createGuardedAgent with the same allowPrivate/lookup/isPublic).
   * When omitted, one is created for this call and closed afterwards.
   */
  dispatcher?: Dispatcher;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

function fail(message: string): JobError {
  return new JobError('media_fetch_failed', `download failed: ${message}`);
}

/** Network errors in client-facing words; a blocked address reads differently after a redirect. */
function describeFetchError(err: unknown, isRedirect: boolean): string {
  if (networkErrorCode(err) === 'ERR_BLOCKED_ADDRESS') {
    return isRedirect ? 'redirect to a private address is not allowed' : 'host resolves to a private address';
  }
  return describeNetworkError(err, 'server');
}

/** A downloaded media item. */
export interface FetchedMedia {
  url: string;
  bytes: Buffer;
  /** e.g. `image/jpeg`; `undefined` when the bytes match no known type. */
  mime: string | undefined;
}

export async function fetchMedia(url: string, opts: FetchMediaOptions): Promise<FetchedMedia> {
  const external = opts.signal;
  external?.throwIfAborted();

  // One controller for the whole download: fired by the deadline or by the caller's signal.
  const controller = new AbortController();
  let timedOut = false as boolean; // set by the deadline's timer
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error('download timed out'));
  }, opts.timeoutMs);
  const onExternalAbort = () => controller.abort(external!.reason);
  external?.addEventListener('abort', onExternalAbort, { once: true });

  const ownDispatcher = opts.dispatcher
    ? undefined
    : createGuardedAgent({ allowPrivate: opts.allowPrivate, lookup: opts.lookup, isPublic: opts.isPublic });
  const dispatcher = opts.dispatcher ?? ownDispatcher!;
  try {
    const res = await followRedirects(url, opts, dispatcher, controller.signal);
    const bytes = await readBody(res, opts.maxBytes, controller.signal);
    const type = await fileTypeFromBuffer(bytes);
    // `url` is the URL as given (what the client knows), not the final redirect target.
    return { url, bytes, mime: type?.mime };
  } catch (err) {
    // A cancel wins over everything and keeps its own reason; the deadline becomes a JobError.
    if (external?.aborted) throw external.reason;
    if (timedOut) throw fail(`timed out after ${formatDuration(opts.timeoutMs)}`);
    throw err;
  } finally {
    clearTimeout(timer);
    external?.removeEventListener('abort', onExternalAbort);
    if (ownDispatcher) void ownDispatcher.destroy().catch(() => {});
  }
}

/** GETs `url`, following redirects by hand (each hop checked), to a 2xx answer. */
async function followRedirects(
  url: string,
  opts: FetchMediaOptions,
  dispatcher: Dispatcher,
  signal: AbortSignal,
): Promise<Dispatcher.ResponseData> {
  const maxRedirects = opts.maxRedirects ?? 5;
  let current = url;
  for (let hop = 0; ; hop++) {
    const checked = checkHop(current, hop, opts);
    let res: Dispatcher.ResponseData;
    try {
      res = await request(checked, {
        method: 'GET',
        dispatcher,
        signal,
        // identity: the bytes counted against maxBytes are the bytes we keep.
        headers: { accept: '*/*', 'accept-encoding': 'identity', 'user-agent': 'media-jobs' },
      });
    } catch (err) {
      if (signal.aborted) throw err; // mapped by fetchMedia
      throw fail(describeFetchError(err, hop > 0));
    }
    if (REDIRECT_STATUSES.has(res.statusCode) && res.headers.location !== undefined) {
      await res.body.dump();
      if (hop >= maxRedirects) throw fail('too many redirects');
      current = redirectTarget(res.headers.location, checked);
      continue;
    }
    if (res.statusCode < 200 || res.statusCode > 299) {
      await res.body.dump();
      throw fail(`HTTP ${res.statusCode}`);
    }
    return res;
  }
}

/** The URL policy for one hop: the first names the client's URL, later ones the redirect. */
function checkHop(current: string, hop: number, opts: FetchMediaOptions): URL {
  const checked = checkUrlSyntax(current, { allowPrivate: opts.allowPrivate, isPublic: opts.isPublic });
  if (checked.ok) return checked.url;
  if (hop === 0) throw fail(checked.reason);
  throw fail(
    checked.reason === REASON_PRIVATE
      ? 'redirect to a private address is not allowed'
      : `redirect target is not allowed (${checked.reason})`,
  );
}

function redirectTarget(location: string | string[], base: URL): string {
  try {
    return new URL(Array.isArray(location) ? location[0]! : location, base).href;
  } catch {
    throw fail('invalid redirect location');
  }
}

/** The body, bounded by `maxBytes` (the declared length first, then the bytes as they come). */
async function readBody(res: Dispatcher.ResponseData, maxBytes: number, signal: AbortSignal): Promise<Buffer> {
  const tooLarge = `larger than ${maxBytes} bytes`;
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.body.destroy();
    throw fail(tooLarge);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of res.body) {
      total += (chunk as Buffer).length;
      if (total > maxBytes) {
        res.body.destroy();
        throw fail(tooLarge);
      }
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof JobError || signal.aborted) throw err;
    throw fail(describeFetchError(err, false));
  }
  return Buffer.concat(chunks, total);
}
