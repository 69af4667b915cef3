/**
 * What JSON.parse accepts but the service cannot take: bodies nested deeper than MAX_DEPTH (a
 * recursive reader would overflow its stack) and numbers beyond a double's range (`1e400` parses
 * as Infinity, which no JSON writer, canonical form or database can hold). Checked once, when the
 * body is parsed, so everything downstream (the idempotency fingerprint, validation, storage)
 * sees only finite numbers.
 */
export const MAX_DEPTH = 64;

/** The reason a parsed body is refused (naming the field), or undefined when it is fine. */
export function jsonBodyProblem(value: unknown): string | undefined {
  // Iterative (no recursion, so no stack overflow on hostile input); paths only once a number is bad.
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return `${pathOfNonFinite(value) || 'body'}: number is out of range`;
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (d >= MAX_DEPTH) return `body is nested more than ${MAX_DEPTH} levels deep`;
    for (const x of Array.isArray(v) ? v : Object.values(v)) stack.push([x, d + 1]);
  }
  return undefined;
}

/** The path of the first non-finite number, in the messages' style (`jobs[0].input.width`). */
function pathOfNonFinite(root: unknown): string {
  const stack: Array<[unknown, string]> = [[root, '']];
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'number' && !Number.isFinite(v)) return path;
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) v.forEach((x, i) => stack.push([x, `${path}[${i}]`]));
    else for (const [k, x] of Object.entries(v)) stack.push([x, path ? `${path}.${short(k)}` : short(k)]);
  }
  return '';
}

/** Echo hostile names only in part: a 1 MB key must not make a 1 MB error message. */
const short = (k: string) => (k.length > 64 ? `${k.slice(0, 64)}…` : k);
