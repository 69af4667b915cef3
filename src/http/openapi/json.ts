/** The OpenAPI document's building blocks: its JSON objects, $refs to components, derived names. */

export type Json = Record<string, unknown>;

export const API = '/api/v1';

export const ref = (kind: 'schemas' | 'responses' | 'parameters' | 'headers', name: string) => ({
  $ref: `#/components/${kind}/${name}`,
});

/** `video-face-swap` → `VideoFaceSwap`: component and operation names from job types and events. */
export const pascal = (name: string) =>
  name
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
