/** The API's envelope, on every response under /api/v1 (errors and unknown routes included). */
export interface Envelope<T extends object = Record<string, unknown>> {
  code: 0 | -1;
  message: string;
  data: T;
}

export const ok = <T extends object>(data: T): Envelope<T> => ({ code: 0, message: 'ok', data });
export const fail = (message: string): Envelope => ({ code: -1, message, data: {} });

/** What Fastify sends JSON as (set by hand when a route sends an envelope it serialised itself). */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
