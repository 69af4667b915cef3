import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';

/**
 * A Fastify scope whose routes are typed by their zod schemas: what each route function of a
 * plugin takes, so a route is one small function with its schema and its handler side by side.
 */
export type ZodApp = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;

/** The scope a plugin is given, typed by zod (the same instance: no new encapsulation context). */
export const zodApp = (scope: FastifyInstance): ZodApp => scope.withTypeProvider<ZodTypeProvider>();
