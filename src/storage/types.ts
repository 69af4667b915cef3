/** Where result blobs live. Keys look like `<uuid>.<ext>`. */
export interface ResultStore {
  put(key: string, bytes: Buffer, contentType: string): Promise<void>;
  delete(key: string): Promise<void>;
  /** An absolute URL that downloads the blob without an API key until `expiresAtMs`. */
  signedUrl(key: string, expiresAtMs: number): Promise<string>;
}
