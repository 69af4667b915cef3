/** `s3://bucket/optional/prefix` → bucket and prefix. */
export function parseS3Url(raw: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(raw);
  if (!m) throw new Error(`RESULT_STORE must be "local" or s3://bucket[/prefix] (got "${raw}")`);
  return { bucket: m[1]!, prefix: (m[2] ?? '').replace(/^\/+|\/+$/g, '') };
}
