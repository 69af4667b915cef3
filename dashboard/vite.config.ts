import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The dashboard is built into dist/dashboard and served by the service at /dashboard/ (no CDN).
// Preact's JSX through Vite's own transformer: no framework plugin needed.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
  },
});
