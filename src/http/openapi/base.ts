import fs from 'node:fs';
import { errorResponses } from './errors.js';
import { headerParameters, responseHeaders } from './headers.js';
import type { Json } from './json.js';

/** The document's fixed parts: what it is, its tags and security schemes, its shared components. */

function packageVersion(): string {
  try {
    // Same depth from src/http/openapi (tsx) and dist/http/openapi (built).
    const pkg = JSON.parse(fs.readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

const OVERVIEW = `Asynchronous media jobs: submit a job, follow its status (long-poll or webhook), cancel it, fetch a signed result URL.

**Authentication.** Every \`/api/v1\` route except this document needs \`Authorization: Bearer <API key>\`. Keys are created with \`media-jobs keys create --owner NAME\`. Missing, malformed, unknown and revoked keys all answer 401.

**Envelope.** Every response under \`/api/v1\` is \`{"code":0,"message":"ok","data":{…}}\` on success and \`{"code":-1,"message":"<reason>","data":{}}\` on error; the HTTP status says which error.

**Request ids.** Every response carries \`X-Request-Id\`; a valid incoming one is echoed.

**Idempotency.** Send \`Idempotency-Key\` on submit: the same key with the same body (key order does not matter) returns the original response for 24 hours, a different body 409.

**States.** \`queued\` → \`processing\` → \`completed\` | \`failed\` | \`cancelled\`. Terminal states never change.

**Clients.** \`import { MediaJobsClient, verifyWebhook } from 'media-jobs'\`, or the \`media-jobs submit|status|wait|result|cancel|jobs\` commands.`;

/** The operations' groups, in the order a viewer shows them. */
const tags = () => [
  { name: 'Jobs', description: 'Submit, follow, cancel and fetch results.' },
  { name: 'Job types', description: 'What can be submitted.' },
  { name: 'Webhooks', description: 'Notifications of terminal states, and their delivery history.' },
  {
    name: 'Webhook endpoints',
    description:
      "An owner's registered endpoints: every job's terminal events, Standard Webhooks signatures, rotation.",
  },
  { name: 'Results', description: 'Signed result downloads (no API key).' },
  {
    name: 'Remote workers',
    description: 'The protocol remote workers speak to serve declared job types (docs/workers.md); worker tokens only.',
  },
  { name: 'Operations', description: 'Health and metrics (no API key).' },
  { name: 'Meta', description: 'This document and its viewer.' },
];

/** API keys everywhere, worker tokens on /api/v1/worker. */
const securitySchemes = () => ({
  bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <API key>`.' },
  workerToken: {
    type: 'http',
    scheme: 'bearer',
    description:
      'A remote worker token (`mjw_…`, from `media-jobs workers create-token`); accepted only on /api/v1/worker.',
  },
});

/** The document's fixed parts (paths come from the routes). */
export function base(): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'media-jobs API',
      version: packageVersion(),
      summary: 'Asynchronous media job service',
      description: OVERVIEW,
      contact: { name: 'media-jobs maintainers' },
      license: { name: 'MIT', identifier: 'MIT' },
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    servers: [{ url: '/', description: 'This server' }],
    security: [{ bearerAuth: [] }],
    tags: tags(),
    components: {
      securitySchemes: securitySchemes(),
      responses: errorResponses(),
      parameters: headerParameters(),
      headers: responseHeaders(),
    },
  };
}
