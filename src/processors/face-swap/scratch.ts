/**
 * Scratch memory for one swap. A swap fills and drops ~15 MB of per-pixel typed arrays (masks, Lab
 * copies, the membrane, the upsampled face); as fresh ArrayBuffers that churn made V8 start a full
 * (mark-compact) collection every few video frames, because external memory counts towards its
 * heap limits. Inside `withScratch`, `floats`, `doubles`, `bytes` and `ints` hand out zeroed views of
 * one buffer that the thread keeps, reused from the start when the outermost scope ends. Outside a
 * scope (or past the arena's end) they allocate as usual.
 *
 * The scope is synchronous on purpose: nothing else can run on the thread while its views are
 * live, and none may be kept after it ends.
 */

/** Every view starts on this boundary (Float64Array needs 8). */
const ALIGN = 16;
/** The arena grows to what a swap asked for, in steps of this... */
const GROW_STEP = 2 ** 20;
/** ...up to this: a bigger swap (a huge face in a photo) gets the rest as ordinary allocations. */
const MAX_BYTES = 96 * 2 ** 20;

let arena = new ArrayBuffer(0);
let used = 0;
/** Bytes the current outermost scope asked for, whether or not they fitted. */
let wanted = 0;
let depth = 0;

/** Offset of `size` bytes in the arena, or -1 when outside a scope or past its end. */
function take(size: number): number {
  if (depth === 0) return -1;
  const aligned = Math.ceil(size / ALIGN) * ALIGN;
  wanted += aligned;
  if (used + aligned > arena.byteLength) return -1;
  const at = used;
  used += aligned;
  return at;
}

export function floats(n: number): Float32Array {
  const at = take(n * 4);
  return at < 0 ? new Float32Array(n) : new Float32Array(arena, at, n).fill(0);
}

export function doubles(n: number): Float64Array {
  const at = take(n * 8);
  return at < 0 ? new Float64Array(n) : new Float64Array(arena, at, n).fill(0);
}

export function bytes(n: number): Uint8Array {
  const at = take(n);
  return at < 0 ? new Uint8Array(n) : new Uint8Array(arena, at, n).fill(0);
}

export function ints(n: number): Int32Array {
  const at = take(n * 4);
  return at < 0 ? new Int32Array(n) : new Int32Array(arena, at, n).fill(0);
}

/** A scratch copy of `a`. */
export function copyOf<T extends Float32Array | Uint8Array>(a: T): T {
  const out = (a instanceof Float32Array ? floats(a.length) : bytes(a.length)) as T;
  out.set(a);
  return out;
}

/**
 * Runs `fn` (synchronous) with scratch allocation on; when the outermost scope ends, the arena is
 * reused from the start (grown first if the scope wanted more than it had).
 */
export function withScratch<T>(fn: () => T): T {
  depth++;
  try {
    const result = fn();
    if (result instanceof Promise) throw new Error('withScratch: the scope must be synchronous');
    return result;
  } finally {
    depth--;
    if (depth === 0) {
      if (wanted > arena.byteLength && wanted <= MAX_BYTES) {
        arena = new ArrayBuffer(Math.ceil(wanted / GROW_STEP) * GROW_STEP);
      }
      used = 0;
      wanted = 0;
    }
  }
}

/** Bytes the thread's arena holds (for tests). */
export function arenaBytes(): number {
  return arena.byteLength;
}
