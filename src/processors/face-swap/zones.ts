/**
 * The feature zones: the landmark groups that are not skin (brows, eyes, outer lip line), which the
 * swap paints into a zone plane numbered from 1 in this order (swap.ts featureZones). Occlusion,
 * recolouring and the swap name zones by these numbers.
 */
export const FEATURES: readonly (readonly [number, number])[] = [
  [17, 22],
  [22, 27],
  [36, 42],
  [42, 48],
  [48, 60],
];
/** The brows' zones. */
export const BROW_ZONES: readonly number[] = [1, 2];
/** The eyes' zones. */
export const EYE_ZONES: readonly number[] = [3, 4];
