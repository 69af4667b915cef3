/**
 * The visible flaws of round 3, each on a small synthetic picture (no models): a coloured light on
 * the source tinting its eyes, a dark speck of the source's hair beside a brow, a flat pale fill of
 * that hair on a shaded temple, dark eye make-up kept as if it were hair.
 */
import { describe, expect, it } from 'vitest';
import { rgbToLab } from '../../src/processors/face-swap/color.js';
import { fillFromSurroundings } from '../../src/processors/face-swap/mask.js';
import { occlusionMask } from '../../src/processors/face-swap/occlusion.js';
import { matchColour } from '../../src/processors/face-swap/recolor.js';
import { planes } from './occlusion-planes.js';

const W = 120;
const H = 100;

const toLinear = (v: number) => {
  const c = v / 255;
  return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
};
const toSrgb = (c: number) => 255 * Math.min(1, c <= 0.0031308 ? c * 12.92 : 1.055 * c ** (1 / 2.4) - 0.055);

/** Irises of radius 7 in their feature zones (3 and 4), grown by a margin of skin as the swap's are. */
const EYES = [
  { x: 35, y: 45, zone: 3 },
  { x: 85, y: 45, zone: 4 },
] as const;
const eyeAt = (x: number, y: number) => EYES.find((e) => Math.hypot(x - e.x, y - e.y) <= 7);
const zoneAt = (x: number, y: number) => EYES.find((e) => Math.hypot(x - e.x, y - e.y) <= 12);

/**
 * A flat synthetic face in Lab: `skin` albedo with grey-brown irises, under a light whose colour goes
 * from `left` to `right` (linear-RGB gains) across the picture.
 */
function litFace(
  left: readonly number[],
  right: readonly number[],
  skin: readonly number[] = [205, 165, 145],
): { lab: Float32Array; zones: Uint8Array } {
  const rgb = new Float32Array(W * H * 3);
  const zones = new Uint8Array(W * H);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const i = y * W + x;
      const eye = eyeAt(x, y);
      const albedo = eye ? [70, 62, 56] : skin;
      zones[i] = zoneAt(x, y)?.zone ?? 0;
      const t = x / (W - 1);
      for (let c = 0; c < 3; c++) {
        const gain = left[c]! * (1 - t) + right[c]! * t;
        rgb[i * 3 + c] = toSrgb(toLinear(albedo[c]!) * gain);
      }
    }
  }
  return { lab: rgbToLab(rgb), zones };
}

/** Mean a*, b* over the pixels of one eye disc. */
function eyeChroma(lab: Float32Array, zone: number): [number, number] {
  let a = 0;
  let b = 0;
  let n = 0;
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      if (eyeAt(x, y)?.zone !== zone) continue;
      const i = y * W + x;
      a += lab[i * 3 + 1]!;
      b += lab[i * 3 + 2]!;
      n++;
    }
  }
  return [a / n, b / n];
}

/** A face's planes for matchColour; without `nonSkin`, nothing is non-skin. */
interface Lit {
  lab: Float32Array;
  zones: Uint8Array;
  nonSkin?: Uint8Array;
  lips?: Uint8Array;
}

/** matchColour of `src` (in place) to `dst` over the whole picture. */
function recolour(src: Lit, dst: Lit): void {
  const n = W * H;
  const none = new Uint8Array(n);
  matchColour(
    { region: { left: 0, top: 0, width: W, height: H }, covered: new Uint8Array(n).fill(1), size: 100, margin: 4 },
    { lab: src.lab, zones: src.zones, nonSkin: src.nonSkin ?? none, lips: src.lips },
    { lab: dst.lab, zones: dst.zones, nonSkin: dst.nonSkin ?? none },
    { alpha: new Float32Array(n).fill(1), occluded: undefined },
    undefined,
    { sigmaAB: 0.1 },
  );
}

describe('colour under a coloured light', () => {
  it("keeps the source's iris colour relations: no teal or yellow eye when an orange/blue light is taken off", () => {
    // The source lit orange from the left and blue from the right; the target evenly, in white.
    const src = litFace([1.25, 0.95, 0.6], [0.75, 0.95, 1.5]);
    const dst = litFace([1, 1, 1], [1, 1, 1]);
    const reference = eyeChroma(dst.lab, 3); // the same grey-brown iris under a white light
    recolour(src, dst);
    const left = eyeChroma(src.lab, 3);
    const right = eyeChroma(src.lab, 4);
    // Both irises are one albedo: after the light is taken off they agree with each other (0.5
    // a*/b* units apart) and stay near the iris under white light (4 units warmer: their own
    // colour is pulled a quarter of the way towards the skin around). Compressed about the skin's
    // mean as a whole, as before, the blue-lit iris came out yellow (b* 6.7 above the white-lit
    // one's, the README example's yellow-green iris) and 6 units apart from the other.
    expect(Math.hypot(left[0] - right[0], left[1] - right[1])).toBeLessThan(1.5);
    for (const eye of [left, right]) {
      expect(Math.abs(eye[0] - reference[0])).toBeLessThan(4.5);
      expect(Math.abs(eye[1] - reference[1])).toBeLessThan(4.5);
    }
  });
});

describe('colour from a pink light to a beige one', () => {
  it('moves a dark iris as the light moves it: no olive eyes from the skin shift added to them whole', () => {
    // One face and iris; the source under a pink light, the target under a beige one.
    const src = litFace([1.35, 0.85, 0.9], [1.35, 0.85, 0.9]);
    const dst = litFace([1.05, 1, 0.75], [1.05, 1, 0.75]);
    const reference = eyeChroma(dst.lab, 3);
    recolour(src, dst);
    // The skin's a* drops by 17; the iris's, a light's change scaled by its lightness (von Kries),
    // by about half that. It comes out within 0.5 of the iris under the beige light; with the skin's
    // whole shift it was 8.8 a* units greener (the README example's olive eyes).
    for (const zone of [3, 4]) {
      const [a, b] = eyeChroma(src.lab, zone);
      expect(Math.abs(a - reference[0])).toBeLessThan(1.5);
      expect(Math.abs(b - reference[1])).toBeLessThan(1.5);
    }
  });
});

/** Lips (zone 5, a margin of skin around them) in a flat face under a light going from `left` to `right`. */
function litLips(left: readonly number[], right: readonly number[]): Required<Lit> {
  const rgb = new Float32Array(W * H * 3);
  const zones = new Uint8Array(W * H);
  const nonSkin = new Uint8Array(W * H);
  const lips = new Uint8Array(W * H);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const i = y * W + x;
      const r = Math.hypot((x - 60) / 30, (y - 70) / 7);
      const albedo = r <= 1 ? [175, 95, 100] : [205, 165, 145];
      nonSkin[i] = lips[i] = r <= 1 ? 1 : 0;
      if (Math.hypot((x - 60) / 34, (y - 70) / 11) <= 1) zones[i] = 5;
      // The two lights meet in the middle, over a few pixels: a blur the face's scale wide does not follow.
      const t = Math.min(1, Math.max(0, (x - 56) / 8));
      for (let c = 0; c < 3; c++) rgb[i * 3 + c] = toSrgb(toLinear(albedo[c]!) * (left[c]! * (1 - t) + right[c]! * t));
    }
  }
  return { lab: rgbToLab(rgb), zones, nonSkin, lips };
}

/** Mean a*, b* of the lips between columns x0 and x1. */
function lipChroma(lab: Float32Array, x0: number, x1: number): [number, number] {
  let a = 0;
  let b = 0;
  let n = 0;
  for (let y = 0; y < H; y++) {
    for (let x = x0; x < x1; x++) {
      if (Math.hypot((x - 60) / 30, (y - 70) / 7) > 1) continue;
      a += lab[(y * W + x) * 3 + 1]!;
      b += lab[(y * W + x) * 3 + 2]!;
      n++;
    }
  }
  return [a / n, b / n];
}

describe('lips under an orange light on one side and a blue one on the other', () => {
  it('come out one colour, not two-tone: the light across them is taken off as on skin', () => {
    const src = litLips([1.25, 0.95, 0.6], [0.75, 0.95, 1.5]);
    const dst = litLips([1, 1, 1], [1, 1, 1]);
    const reference = lipChroma(dst.lab, 30, 90);
    recolour(src, dst);
    const left = lipChroma(src.lab, 30, 45);
    const right = lipChroma(src.lab, 75, 90);
    // The lips are one albedo: their two ends agree (4.2 a*b* units apart: what varies across them
    // is compressed as the skin's light is; 2.6 when chroma moved in a*, b* units, not relative to
    // L* + 16, where the blue-lit end, 2.5 L* darker, keeps a little more) and stay near the lips under white light (7.5: their
    // own colour against the skin compressed to 0.75, as every feature's). Read per pixel against
    // the skin around (a blur too wide to follow two lights meeting across the mouth), the ends
    // came out 7.7 apart: the README example's orange corner and lilac upper lip.
    expect(Math.hypot(left[0] - right[0], left[1] - right[1])).toBeLessThan(4.5);
    for (const end of [left, right]) expect(Math.hypot(end[0] - reference[0], end[1] - reference[1])).toBeLessThan(9);
  });
});

describe("lips into a face whose skin's colour spreads wider", () => {
  it("keep their own colour against the skin: not stretched with the skin's spread", () => {
    // The source evenly lit; the target lit orange on one side and blue on the other, so its skin's
    // chroma spreads much wider than the source's (the spread gain's cap, 1.33).
    const src = litLips([1.03, 1, 0.97], [0.97, 1, 1.03]);
    const dst = litLips([1.25, 0.95, 0.6], [0.75, 0.95, 1.5]);
    /** The lips' mean a*, b* over L* + 16 less the skin's just above them, over the same columns. */
    const relation = (lab: Float32Array) => {
      const rel = (x: number, y: number, c: number) => lab[(y * W + x) * 3 + c]! / (lab[(y * W + x) * 3]! + 16);
      const lips = { a: 0, b: 0, n: 0 };
      const skin = { a: 0, b: 0, n: 0 };
      for (let y = 0; y < H; y++) {
        for (let x = 30; x < 90; x++) {
          const at = Math.hypot((x - 60) / 30, (y - 70) / 7) <= 1 ? lips : y >= 52 && y < 57 ? skin : undefined;
          if (!at) continue;
          at.a += rel(x, y, 1);
          at.b += rel(x, y, 2);
          at.n++;
        }
      }
      return [lips.a / lips.n - skin.a / skin.n, lips.b / lips.n - skin.b / skin.n] as const;
    };
    const own = relation(src.lab);
    recolour(src, dst);
    const got = relation(src.lab);
    // The skin's chroma is stretched 1.33 (its spread's cap); the lips' own colour, stretched with
    // it, came out 0.484 a* over L* + 16 above the skin against their own 0.364: a deeper red (the
    // sheet's sample5 face 4). Held to at most 1 (color.ts FEATURE_SPREAD_MAX): 0.371.
    expect(Math.hypot(got[0] - own[0], got[1] - own[1])).toBeLessThan(0.2 * Math.hypot(own[0], own[1]));
  });
});

describe('the source hair at a temple', () => {
  it('is taken whole: its darkest strands, and the mid-dark ones the skin band let through', () => {
    const strands = (x: number, y: number) => x >= 6 && x < 9 && y >= 30 && y < 33;
    const midDark = (x: number, y: number) => x >= 6 && x < 9 && y >= 40 && y < 43;
    const p = planes((q, x, y, i) => {
      if (x >= 14) return;
      // A brown lock down the temple, with a black core (a colour step of more than ΔE 12 from the
      // lock around it: a region of its own, too small to count) and a mid-dark patch the skin
      // model's lenient lightness band called skin.
      q.nonSkin[i] = midDark(x, y) ? 0 : 1;
      q.lab.set(strands(x, y) ? [12, 2, 3] : midDark(x, y) ? [45, 8, 14] : [38, 8, 14], i * 3);
    });
    const hair = occlusionMask(p, true);
    for (let y = 0; y < 60; y++) {
      for (let x = 0; x < 14; x++) expect(hair[y * 60 + x], `(${x}, ${y})`).toBe(1);
      for (let x = 16; x < 60; x++) expect(hair[y * 60 + x]).toBe(0);
    }
  });

  it('is filled with the shade of the skin at its edge, not the mean of the brighter skin further in', () => {
    const w = 80;
    const h = 40;
    const lab = new Float32Array(w * h * 3);
    const hole = new Uint8Array(w * h);
    const known = new Uint8Array(w * h);
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const i = y * w + x;
        // Skin brightening from the shaded temple (x 20) inwards; a lock over x < 20.
        lab.set([30, 40, 40], i * 3);
        if (x < 20) hole[i] = 1;
        else {
          known[i] = 1;
          lab.set([40 + (x - 20), 12, 16], i * 3);
        }
      }
    }
    fillFromSurroundings(lab, hole, known, w, h);
    for (let y = 0; y < h; y += 5) {
      for (let x = 0; x < 20; x += 3) {
        const L = lab[(y * w + x) * 3]!;
        expect(L).toBeGreaterThan(38);
        expect(L).toBeLessThan(43); // the box mean gave 48-60: a pale band
        expect(lab[(y * w + x) * 3 + 1]).toBeCloseTo(12, 0);
      }
    }
  });
});

describe('occluders of the target', () => {
  it('enter the inner face only in their own colour: eye make-up touching the hair stays replaced', () => {
    const hairAt = (x: number) => x < 10;
    const makeUp = (x: number, y: number) => x >= 22 && x < 40 && y >= 20 && y < 38;
    const p = planes((q, x, y, i) => {
      if (hairAt(x)) {
        q.nonSkin[i] = 1;
        q.lab.set([40, 10, 22], i * 3);
      } else if (x < 22 && y >= 25 && y < 30) {
        // A bridge from the hair to the make-up, changing colour by less than one region's step.
        const t = (x - 10) / 12;
        q.nonSkin[i] = 1;
        q.lab.set([40 - 10 * t, 10 - 8 * t, 22 - 40 * t], i * 3);
      } else if (makeUp(x, y)) {
        q.nonSkin[i] = 1;
        q.lab.set([30, 2, -18], i * 3);
      }
    });
    const occluded = occlusionMask(p);
    expect(occluded[30 * 60 + 5]).toBe(1); // the hair stays in front
    let kept = 0;
    for (let y = 0; y < 60; y++) for (let x = 0; x < 60; x++) if (makeUp(x, y)) kept += occluded[y * 60 + x]!;
    expect(kept).toBe(0);
  });
});

describe('target hair at a temple', () => {
  it('stays in front in the ring beside the landmarks, short of crossing the face', () => {
    // A lock down the temple, reaching 3 px into the inner face's margin beside a brow's end.
    const lock = (x: number, y: number) => x < 23 && y >= 8 && y < 22;
    const p = planes((q, x, y, i) => {
      if (!lock(x, y)) return;
      q.nonSkin[i] = 1;
      q.lab.set([30, 8, 12], i * 3);
    });
    const occluded = occlusionMask(p);
    // Left out (as it was), the source's pale temple took its place: the README example's pale wedge.
    for (let y = 8; y < 22; y++) for (let x = 0; x < 23; x++) expect(occluded[y * 60 + x], `(${x}, ${y})`).toBe(1);
  });
});

describe('eye make-up as dark as the hair it touches', () => {
  const HAIR = [20, 3, 10] as const;
  const hairAt = (x: number) => x < 10;
  /** An eye's zone; inside it the eye itself (white and iris, in other colours), the paint around. */
  const zone = (x: number, y: number) => x >= 28 && x < 44 && y >= 21 && y < 31;
  const eye = (x: number, y: number) => x >= 31 && x < 41 && y >= 22 && y < 30;
  /** A winged liner from the temple hair to the eye, and clown paint below it down the cheek. */
  const paint = (x: number, y: number) =>
    (x >= 10 && x < 28 && y >= 24 && y < 28) || (zone(x, y) && !eye(x, y)) || (x >= 31 && x < 41 && y >= 31 && y < 46);

  it('is replaced with the eye: the paint is not kept in front, the hair at the outline is', () => {
    const p = planes((q, x, y, i) => {
      if (zone(x, y)) q.zoneOf[i] = 3;
      if (hairAt(x) || paint(x, y)) {
        q.nonSkin[i] = 1;
        q.lab.set(HAIR, i * 3);
      } else if (eye(x, y)) {
        q.nonSkin[i] = 1;
        q.lab.set(x >= 34 && x < 38 ? [25, 5, 20] : [80, 0, 2], i * 3);
      }
    });
    const occluded = occlusionMask(p);
    expect(occluded[30 * 60 + 5]).toBe(1);
    let kept = 0;
    for (let y = 0; y < 60; y++) for (let x = 20; x < 60; x++) if (paint(x, y)) kept += occluded[y * 60 + x]!;
    // Kept in front (as before: the paint is the hair's colour, joined to it, and crosses the inner
    // face), it stayed around the new eye as a ghost of the target's make-up.
    expect(kept).toBe(0);
  });

  it('is replaced where it is a line round the eye, too little of the zone to read as paint; a lock over the eye stays', () => {
    // sample6 face 1: the liner round her eye (17-20% of the zone in the hair's colour, under the
    // paint rule's 28%) and its lashes, joined to the hair at the temple by a thin wing, stayed
    // round the new eye as a second outline.
    const big = (x: number, y: number) => x >= 28 && x < 48 && y >= 19 && y < 33;
    const white = (x: number, y: number) => x >= 31 && x < 45 && y >= 22 && y < 30;
    const liner = (x: number, y: number) =>
      ((y === 21 || y === 30) && x >= 30 && x < 46) || ((x === 30 || x === 45) && y >= 22 && y < 30);
    const wing = (x: number, y: number) => x >= 10 && x < 30 && y >= 21 && y < 23;
    const lashes = (x: number, y: number) => (y === 20 && x >= 30 && x < 46) || (y === 19 && x >= 28 && x < 48);
    const p = planes((q, x, y, i) => {
      if (big(x, y)) q.zoneOf[i] = 3;
      if (hairAt(x) || wing(x, y) || liner(x, y)) {
        q.nonSkin[i] = 1;
        q.lab.set(HAIR, i * 3);
      } else if (lashes(x, y)) {
        // Joined to the liner by steps under a region's, but more than ΔE 14 from the hair at its top row.
        q.nonSkin[i] = 1;
        q.lab.set(y === 20 ? [20, 3, 1] : [20, 3, -8], i * 3);
      } else if (white(x, y)) {
        q.nonSkin[i] = 1;
        q.lab.set([80, 0, 2], i * 3);
      }
    });
    let kept = 0;
    const occluded = occlusionMask(p);
    for (let y = 0; y < 60; y++)
      for (let x = 0; x < 60; x++) if (big(x, y) && liner(x, y)) kept += occluded[y * 60 + x]!;
    expect(occluded[30 * 60 + 5]).toBe(1);
    expect(kept).toBe(0); // 48 of 48 kept before
    // A lock of the hair's colour falling over the eye's outer corner (thick) stays in front of it.
    const lock = (x: number, y: number) => x < 34 && y >= 16 && y < 36;
    const q = planes((r, x, y, i) => {
      if (zone(x, y)) r.zoneOf[i] = 3;
      if (hairAt(x) || lock(x, y)) {
        r.nonSkin[i] = 1;
        r.lab.set(HAIR, i * 3);
      }
    });
    const front = occlusionMask(q);
    for (let y = 21; y < 31; y++) for (let x = 28; x < 34; x++) expect(front[y * 60 + x], `(${x}, ${y})`).toBe(1);
  });

  it('but a bar of that colour hiding a feature whole stays in front of it', () => {
    const bar = (y: number) => y >= 36 && y < 48;
    const mouth = (x: number, y: number) => x >= 28 && x < 44 && y >= 38 && y < 46;
    const p = planes((q, x, y, i) => {
      if (mouth(x, y)) q.zoneOf[i] = 5;
      if (hairAt(x) || bar(y)) {
        q.nonSkin[i] = 1;
        q.lab.set(HAIR, i * 3);
      }
    });
    const occluded = occlusionMask(p);
    for (let y = 38; y < 46; y++) for (let x = 28; x < 44; x++) expect(occluded[y * 60 + x], `(${x}, ${y})`).toBe(1);
  });
});
