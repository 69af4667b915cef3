import type { FastifySchemaCompiler } from 'fastify';
import type { z } from 'zod';
import { describeIssues } from '../jobs/submit-schema.js';
import { ApiError } from './api-error.js';

/**
 * A schema's fast check: the parsed value when the input is plainly valid, else undefined, and
 * zod then decides (and words any error). For the small schemas of the hottest routes, where
 * zod's parse costs more than the rest of the check.
 */
type FastCheck = (data: unknown) => unknown;

const fastChecks = new WeakMap<z.ZodType, FastCheck>();

/** Gives `schema` a fast check; it must accept only what the schema accepts, and give what it gives. */
export function withFastCheck<T extends z.ZodType>(schema: T, check: (data: unknown) => z.output<T> | undefined): T {
  fastChecks.set(schema, check);
  return schema;
}

/**
 * Route schemas are zod (fastify-type-provider-zod's convention): they validate requests here,
 * with the envelope's words (the first three issues), and build the OpenAPI document (openapi.ts).
 */
export const validatorCompiler: FastifySchemaCompiler<z.ZodType> = ({ schema }) => {
  const fast = fastChecks.get(schema);
  const parse = (data: unknown) => {
    const r = schema.safeParse(data ?? {});
    return r.success ? { value: r.data } : { error: new ApiError(400, describeIssues(r.error.issues, data)) };
  };
  if (!fast) return parse;
  return (data: unknown) => {
    const value = fast(data);
    return value === undefined ? parse(data) : { value };
  };
};
