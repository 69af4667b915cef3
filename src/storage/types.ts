/** Where result blobs live. Keys look like `<uuid>.<ext>`. */
export interface ResultStore {
  /** Stores the blob whole or not at all (no reader ever sees part of it); `signal` abandons it. */
  put(key: string, bytes: Buffer, contentType: string, signal?: AbortSignal): Promise<void>;
  delete(key: string): Promise<void>;
  /** An absolute URL that downloads the blob without an API key until `expiresAtMs`. */
  signedUrl(key: string, expiresAtMs: number): Promise<string>;
  /** Resolves when the storage can take a blob now; rejects with the reason otherwise (readiness). */
  check(signal: AbortSignal): Promise<void>;
}
