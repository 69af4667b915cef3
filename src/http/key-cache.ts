import { LruMap } from 'toad-cache';
import type { Kysely } from 'kysely';
import { findActiveKey, hashKey, onKeyRevoked } from '../store/keys.js';
import type { Database } from '../store/schema.js';

export interface KeyOwner {
  id: string;
  owner: string;
}

/** How long a found key is trusted without asking the database: the documented revoke delay across processes. */
export const KEY_CACHE_TTL_MS = 5_000;
/** Unknown keys are remembered more briefly (a key created in another process works within this). */
export const KEY_CACHE_NEGATIVE_TTL_MS = 1_000;
const MAX_ENTRIES = 10_000;

/**
 * API key → { id, owner }, so an authenticated request costs one map lookup: no query, and no
 * SHA-256 (only a miss hashes the key to look it up; the keys held here are ones this process
 * was just sent, for seconds). Bounded (LRU) and short-lived; a revoke in this process clears it at
 * once, one in another process (PostgreSQL NOTIFY, or simply the TTL) within KEY_CACHE_TTL_MS.
 * Concurrent misses for the same key share one query.
 */
export class KeyCache {
  private readonly found = new LruMap<KeyOwner>(MAX_ENTRIES, KEY_CACHE_TTL_MS);
  private readonly unknown = new LruMap<true>(MAX_ENTRIES, KEY_CACHE_NEGATIVE_TTL_MS);
  private readonly inFlight = new Map<string, Promise<KeyOwner | undefined>>();
  private readonly unsubscribe: () => void;
  /** Bumped on every invalidation, so a lookup started before a revoke does not re-cache its answer. */
  private generation = 0;

  constructor(private readonly db: Kysely<Database>) {
    this.unsubscribe = onKeyRevoked(() => this.clear());
  }

  /** What the cache knows of `key` now: its owner, null for a key known to be invalid, undefined for a miss. */
  known(key: string): KeyOwner | null | undefined {
    const hit = this.found.get(key);
    if (hit) return hit;
    return this.unknown.get(key) ? null : undefined;
  }

  async lookup(key: string): Promise<KeyOwner | undefined> {
    const known = this.known(key);
    if (known !== undefined) return known ?? undefined;
    let pending = this.inFlight.get(key);
    if (!pending) {
      const generation = this.generation;
      pending = findActiveKey(this.db, hashKey(key))
        .then((row) => {
          if (generation === this.generation) {
            if (row) this.found.set(key, { id: row.id, owner: row.owner });
            else this.unknown.set(key, true);
          }
          return row;
        })
        .finally(() => {
          if (this.inFlight.get(key) === pending) this.inFlight.delete(key);
        });
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  /** Forget everything (a key was revoked: revokes are rare, a full clear is simplest and safe). */
  clear(): void {
    this.generation++;
    this.inFlight.clear();
    this.found.clear();
    this.unknown.clear();
  }

  close(): void {
    this.unsubscribe();
  }
}
