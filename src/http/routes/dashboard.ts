import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import send from '@fastify/send';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
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
  app.get('/dashboard/*', { schema: { hide: true } }, async (request, reply) =>
    serveFile(request, reply, (request.params as { '*': string })['*'] || 'index.html'),
  );
  // The page itself (the wildcard does not answer the bare prefix).
  app.get('/dashboard/', { schema: { hide: true } }, async (request, reply) => serveFile(request, reply, 'index.html'));
  // Browsers ask the origin for its icon whatever the page says: the dashboard's.
  app.get('/favicon.ico', { schema: { hide: true } }, async (request, reply) =>
    serveFile(request, reply, 'favicon.svg'),
  );
}

/**
 * One file of the build through @fastify/send (ranges, ETag, conditional requests; a path that
 * leaves the root or names a dotfile is refused), with this page's security and cache headers.
 */
async function serveFile(request: FastifyRequest, reply: FastifyReply, file: string) {
  const sent = await send(request.raw, encodeURI(`/${file}`), {
    root: DASHBOARD_DIR,
    index: false,
    dotfiles: 'deny',
    cacheControl: false,
  });
  if (sent.type !== 'file') {
    sent.stream.destroy();
    const status = sent.statusCode >= 500 ? 500 : 404;
    return reply.code(status).send(fail(status === 404 ? 'not found' : 'internal error'));
  }
  reply.code(sent.statusCode).headers(sent.headers);
  reply.header('x-content-type-options', 'nosniff').header('referrer-policy', 'no-referrer');
  if (file.endsWith('.html'))
    reply.header('content-security-policy', DASHBOARD_CSP).header('cache-control', 'no-cache');
  // Vite puts a content hash in every asset name.
  else if (file.startsWith('assets/')) reply.header('cache-control', 'public, max-age=31536000, immutable');
  else reply.header('cache-control', 'public, max-age=86400');
  return reply.send(sent.stream);
}
