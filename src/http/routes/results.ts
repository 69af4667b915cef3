import type { FastifyInstance } from 'fastify';
import type { Clock } from '../../clock.js';
import type { LocalResultStore } from '../../storage/local.js';
import { verifyResultPath } from '../../storage/signing.js';
import { mediaTypeOfName } from '../../media/extensions.js';
import { z } from 'zod';
import { ApiError } from '../api-error.js';
import { responses } from '../schemas.js';

const resultQuery = z.object({
  expires: z.coerce.number().int().describe('Expiry, Unix seconds.'),
  signature: z.string().describe('HMAC signature (base64url).'),
});

/** Downloads of local results: no API key, the HMAC-signed, expiring URL is the credential. */
export function resultRoutes(app: FastifyInstance, store: LocalResultStore, secret: string, clock: Clock): void {
  // Checked by verifyResultPath (its 403 words), so the schema documents only: no validation on this route.
  app.get(
    '/results/:key',
    {
      schema: {
        operationId: 'downloadResult',
        tags: ['Results'],
        security: [],
        params: z.object({ key: z.string().describe('Result object key.') }),
        querystring: resultQuery,
        response: responses(
          { 200: { description: 'The result bytes.', schema: z.string(), type: 'application/octet-stream' } },
          403,
          410,
        ),
      },
      validatorCompiler: () => (value: unknown) => ({ value }),
    },
    async (request, reply) => {
      // Unvalidated on purpose (validatorCompiler above): verifyResultPath checks whatever came.
      const { key } = request.params as { key: string };
      const q = request.query as Record<string, unknown>;
      const check = verifyResultPath(secret, key, q.expires, q.signature, clock.now());
      if (check === 'invalid') throw new ApiError(403, 'result URL signature is invalid');
      if (check === 'expired')
        throw new ApiError(403, 'result URL has expired; fetch a new one from GET /api/v1/jobs/{uuid}/result');
      const blob = await store.open(key);
      if (!blob) throw new ApiError(410, 'result is no longer available');
      const expiresIn = Math.max(0, Number(q.expires) - Math.floor(clock.now() / 1000));
      return reply
        .header('content-type', mediaTypeOfName(key))
        .header('content-length', blob.size)
        .header('cache-control', `private, max-age=${expiresIn}`)
        .header('x-content-type-options', 'nosniff')
        .send(blob.stream);
    },
  );
}
