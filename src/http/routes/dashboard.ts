import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { fail } from '../envelope.js';

/** Built by `npm run build:dashboard` (part of `prepare`); same depth from src/ (tsx) and dist/. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../../dist/dashboard/', import.meta.url));

// Everything from this origin only. Images and media too: the page never makes the operator's
// browser fetch a URL a client supplied (job inputs are shown as links, result previews come from
// this service), so a hostile input URL cannot reach the operator's network through the browser.
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "media-src 'self' data: blob:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/**
 * GET /dashboard/…: the web dashboard (dashboard/ in the repository), static files served by this
 * process: no CDN. The API key or admin token lives in the tab's sessionStorage and travels as a
 * Bearer header; nothing here reads or sets a cookie.
 */
export async function dashboardRoutes(app: FastifyInstance): Promise<void> {
  const built = fs.existsSync(`${DASHBOARD_DIR}index.html`);
  // The router ignores trailing slashes: /dashboard serves the page too (asset URLs are absolute).
  if (!built) {
    app.get('/dashboard/*', { schema: { hide: true } }, async (_request, reply) =>
      reply.code(503).send(fail('the dashboard is not built: run "npm run build:dashboard" (npm ci does it)')),
    );
    return;
  }
  await app.register(fastifyStatic, {
    root: DASHBOARD_DIR,
    prefix: '/dashboard/',
    index: ['index.html'],
    wildcard: true,
    schemaHide: true,
    cacheControl: false,
    setHeaders(reply, filePath) {
      reply.header('x-content-type-options', 'nosniff');
      reply.header('referrer-policy', 'no-referrer');
      if (filePath.endsWith('.html')) {
        reply.header('content-security-policy', DASHBOARD_CSP);
        reply.header('cache-control', 'no-cache');
      } else if (filePath.includes('/assets/')) {
        // Vite puts a content hash in every asset name.
        reply.header('cache-control', 'public, max-age=31536000, immutable');
      }
    },
  });
  // The page itself (the static wildcard does not answer the bare prefix).
  app.get('/dashboard/', { schema: { hide: true } }, async (_request, reply) =>
    reply
      .header('content-security-policy', DASHBOARD_CSP)
      .header('cache-control', 'no-cache')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .sendFile('index.html'),
  );
}
