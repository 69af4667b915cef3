import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ApiError } from '../api-error.js';
import type { OpenApiDeps } from '../openapi.js';
import { responses } from '../schemas.js';
import { zodApp } from '../zod-app.js';

/**
 * GET /api/v1/openapi.json (no API key, not enveloped: it is the document) and GET /docs, an
 * interactive viewer (Swagger UI) whose every asset is served by this process from the
 * swagger-ui-dist package: nothing is loaded from a CDN.
 *
 * Register on the root instance (outside the authenticated /api/v1 scope).
 */
export type DocsDeps = OpenApiDeps;

export const OPENAPI_PATH = '/api/v1/openapi.json';

/** The viewer's files: name → [file in swagger-ui-dist or our own text, content type]. */
const ASSETS: Record<string, { file?: string; text?: string; type: string }> = {
  'swagger-ui.css': { file: 'swagger-ui.css', type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { file: 'swagger-ui-bundle.js', type: 'text/javascript; charset=utf-8' },
  'favicon-32x32.png': { file: 'favicon-32x32.png', type: 'image/png' },
  'favicon-16x16.png': { file: 'favicon-16x16.png', type: 'image/png' },
  // Our initializer, a file rather than an inline script so the page's CSP can forbid inline scripts.
  'init.js': {
    type: 'text/javascript; charset=utf-8',
    text: `window.addEventListener('load', function () {
  var el = document.getElementById('swagger-ui');
  window.ui = SwaggerUIBundle({
    url: el.getAttribute('data-url'),
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
    validatorUrl: null,
    tryItOutEnabled: false,
    persistAuthorization: false,
    displayRequestDuration: true,
    docExpansion: 'list',
    defaultModelsExpandDepth: 0
  });
});
`,
  },
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>media-jobs API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
<link rel="icon" type="image/png" href="/docs/favicon-16x16.png" sizes="16x16">
</head>
<body>
<noscript>This page needs JavaScript. The API description itself is at <a href="${OPENAPI_PATH}">${OPENAPI_PATH}</a>.</noscript>
<div id="swagger-ui" data-url="${OPENAPI_PATH}"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// Same-origin only: the viewer can reach this server (for "Try it out") and nothing else.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

let distDir: string | undefined;
function swaggerUiDist(): string {
  distDir ??= path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  return distDir;
}

const cache = new Map<string, Buffer>();
function asset(name: string): Buffer | undefined {
  const a = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
  if (!a) return undefined;
  let body = cache.get(name);
  if (!body) {
    body = a.text !== undefined ? Buffer.from(a.text) : fs.readFileSync(path.join(swaggerUiDist(), a.file!));
    cache.set(name, body);
  }
  return body;
}

const meta = (operationId: string) => ({ operationId, tags: ['Meta'], security: [] });

/** Needs @fastify/swagger registered on `app` (server.ts): the document is built from the route schemas. */
export function docsRoutes(app: FastifyInstance, _deps: DocsDeps): void {
  documentRoute(app);
  viewerRoutes(app);
}

/** GET /api/v1/openapi.json: the document, serialised once, on the first request. */
function documentRoute(app: FastifyInstance): void {
  let doc: string | undefined;
  const openApiResponse = responses({ 200: { description: 'The OpenAPI document.', schema: z.looseObject({}) } });
  app.get(OPENAPI_PATH, { schema: { ...meta('getOpenApi'), response: openApiResponse } }, async (_request, reply) => {
    doc ??= JSON.stringify(app.swagger());
    return reply
      .header('content-type', 'application/json; charset=utf-8')
      .header('cache-control', 'no-cache')
      .send(doc);
  });
}

/** GET /docs and /docs/:asset: the Swagger UI page and its files. */
function viewerRoutes(app: FastifyInstance): void {
  app.get(
    '/docs',
    {
      schema: {
        ...meta('getDocs'),
        response: responses({ 200: { description: 'An HTML page.', schema: z.string(), type: 'text/html' } }),
      },
    },
    async (_request, reply) =>
      reply
        .header('content-type', 'text/html; charset=utf-8')
        .header('content-security-policy', CSP)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
        .send(PAGE),
  );

  zodApp(app).get(
    '/docs/:asset',
    { schema: { hide: true, params: z.object({ asset: z.string() }) } },
    async (request, reply) => {
      const name = request.params.asset;
      const body = asset(name);
      if (!body) throw new ApiError(404, `no route GET /docs/${name}`);
      return reply
        .header('content-type', ASSETS[name]!.type)
        .header('x-content-type-options', 'nosniff')
        .header('cache-control', 'public, max-age=3600')
        .send(body);
    },
  );
}
