/**
 * Order statistics without sorting: the swap takes several robust medians per face (skin models,
 * lighting residuals, the Poisson ring), and a full sort of thousands of values was a visible share
 * of a video frame's time. Quickselect finds the same element in linear time.
 */
type Numbers = Float32Array | Float64Array;

/**
 * The value that would sit at index `k` of `a[0..n)` sorted ascending (`a` is reordered). Hoare
 * partition around a median-of-three pivot.
 */
export function kthSmallest(a: Numbers, k: number, n: number = a.length): number {
  let lo = 0;
  let hi = n - 1;
  while (hi > lo) {
    const mid = (lo + hi) >> 1;
    // Median of three as the pivot, so sorted or constant input stays linear.
    let x = a[lo]!;
    let y = a[mid]!;
    const z = a[hi]!;
    if (x > y) [x, y] = [y, x];
    const pivot = z < x ? x : z > y ? y : z;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) {
        const t = a[i]!;
        a[i] = a[j]!;
        a[j] = t;
        i++;
        j--;
      }
    }
    // Now a[lo..j] <= pivot <= a[i..hi], and everything between j and i equals the pivot.
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k]!;
  }
  return a[k]!;
}

/** The upper median of `a[0..n)` (index n >> 1 when sorted), as sort-then-index gives it; `a` is reordered. */
export function medianInPlace(a: Numbers, n: number = a.length): number {
  return kthSmallest(a, n >> 1, n);
}

/**
 * The median of `a[0..n)` and its robust spread: 1.4826 × the median absolute deviation (the
 * standard deviation of a normal sample, unmoved by a minority of outliers). `a` is overwritten.
 */
export function medianAndSpread(a: Numbers, n: number = a.length): { m: number; s: number } {
  const m = medianInPlace(a, n);
  for (let k = 0; k < n; k++) a[k] = Math.abs(a[k]! - m);
  return { m, s: 1.4826 * medianInPlace(a, n) };
}

/** medianInPlace of a plain list (copied: the list is left as it is); NaN when it is empty. */
export function medianOf(values: readonly number[]): number {
  return values.length ? medianInPlace(Float64Array.from(values)) : Number.NaN;
}
