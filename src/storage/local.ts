import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { ResultStore } from './types.js';
import { signResultPath } from './signing.js';

// <uuid>.<attempt>.<ext>: one key per attempt, so a late attempt never overwrites another's; a
// remote attempt's staged inputs are <uuid>.<attempt>.in-<slot>-<i>-<tag>.<ext>.
const KEY_RE = /^[0-9a-f-]{36}\.\d{1,4}(\.in-[a-z]{1,12}-\d{1,3}-[0-9a-f]{8})?\.[a-z0-9]{1,5}$/;

/** Result files under DATA_DIR/results, served by this service on HMAC-signed expiring URLs. */
export class LocalResultStore implements ResultStore {
  constructor(
    readonly dir: string,
    private readonly publicBaseUrl: string,
    private readonly secret: string,
  ) {
    fs.mkdirSync(dir, { recursive: true });
  }

  private file(key: string): string {
    // Keys come from our own rows, but the download route parses them from a URL: stay inside dir.
    if (!KEY_RE.test(key)) throw new Error(`bad result key ${key}`);
    return path.join(this.dir, key);
  }

  async put(key: string, bytes: Buffer, _contentType?: string, signal?: AbortSignal): Promise<void> {
    // Write then rename, so a crash or a full disk never leaves a half-written result under the
    // real name (temporary names start with a dot, which KEY_RE never serves); a failed write
    // removes its temporary file, so a full disk does not stay full of halves.
    const file = this.file(key);
    const tmp = this.tempName(key);
    try {
      await fsp.writeFile(tmp, bytes, { signal });
      await fsp.rename(tmp, file);
    } catch (err) {
      await fsp.rm(tmp, { force: true }).catch(() => undefined);
      throw err;
    }
  }

  /** Writes and removes one byte: a full disk or a read-only mount fails here, as a result would. */
  async check(signal: AbortSignal): Promise<void> {
    const probe = this.tempName('probe');
    try {
      await fsp.writeFile(probe, '.', { signal });
    } finally {
      await fsp.rm(probe, { force: true }).catch(() => undefined);
    }
  }

  private tempName(key: string): string {
    return path.join(this.dir, `.${key}.${randomBytes(4).toString('hex')}.tmp`);
  }

  async delete(key: string): Promise<void> {
    await fsp.rm(this.file(key), { force: true });
  }

  signedUrl(key: string, expiresAtMs: number): Promise<string> {
    const expires = Math.floor(expiresAtMs / 1000);
    const sig = signResultPath(this.secret, key, expires);
    return Promise.resolve(`${this.publicBaseUrl}/results/${key}?expires=${expires}&signature=${sig}`);
  }

  /** Opens a blob for the download route; undefined when the key is malformed or missing. */
  async open(key: string): Promise<{ stream: fs.ReadStream; size: number } | undefined> {
    if (!KEY_RE.test(key)) return undefined;
    try {
      const handle = await fsp.open(this.file(key), 'r');
      const { size } = await handle.stat();
      return { stream: handle.createReadStream(), size };
    } catch {
      return undefined;
    }
  }
}
