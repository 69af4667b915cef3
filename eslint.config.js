// Lint: typescript-eslint's strict type-checked rules over the server, tests, benchmarks and the
// dashboard; Prettier owns formatting (eslint-config-prettier turns off the rules it decides).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

/** An import path into src/contract/ (the wire's constants and shapes). */
const CONTRACT = /(^|\/)contract\/[a-z-]+\.js$/;

/**
 * The contract is imported from src/contract/ directly by whoever needs it: a module that passes
 * its names on (`export … from`, or `export { name }` of an imported name) makes a second door.
 */
const noContractReexport = {
  meta: {
    type: 'problem',
    messages: { reexport: 'Import {{name}} from src/contract/ directly; do not re-export the contract.' },
  },
  create(context) {
    const imported = new Set();
    const exported = [];
    return {
      ImportDeclaration(node) {
        if (CONTRACT.test(node.source.value)) for (const s of node.specifiers) imported.add(s.local.name);
      },
      ExportAllDeclaration(node) {
        if (CONTRACT.test(node.source.value)) context.report({ node, messageId: 'reexport', data: { name: '*' } });
      },
      ExportNamedDeclaration(node) {
        if (node.source && CONTRACT.test(node.source.value))
          context.report({ node, messageId: 'reexport', data: { name: node.source.value } });
        else if (!node.source) exported.push(...node.specifiers);
      },
      'Program:exit'() {
        for (const s of exported) {
          if (imported.has(s.local.name))
            context.report({ node: s, messageId: 'reexport', data: { name: s.local.name } });
        }
      },
    };
  },
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**', 'bench/results/**', 'examples/**'] },
  js.configs.recommended,
  tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['dashboard/vite.config.ts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // Off: with noUncheckedIndexedAccess, `rows[0]!` after a length or existence check is the
      // idiomatic way to say "checked"; the alternative is a runtime branch that cannot be taken.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Numbers, booleans and null print as expected in messages and SQL identifiers.
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true, allowNullish: true },
      ],
      // `() => void promise` and `(x) => set.add(x)` callbacks are clear as they are.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // JSX event handlers may be async (Preact ignores what they return); other misused promises stay errors.
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { attributes: false } }],
    },
  },
  {
    files: ['src/http/**', 'test/**', 'bench/**'],
    rules: {
      // Fastify plugins, hooks and handlers are async by convention (the returned promise is how
      // they signal completion), and test callbacks implement async interfaces: many await nothing.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['test/**', 'bench/**'],
    rules: {
      // Tests and benchmarks read JSON bodies off the wire as `any` and assert on their shape (the
      // shape is what is under test); typing every response would restate the schemas they check.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // Teardown guards (`svc?.stop()` in afterAll) run even when setup failed, where the declared
      // type says the value is always set.
      '@typescript-eslint/no-unnecessary-condition': 'off',
    },
  },
  {
    files: ['src/**/*.ts', 'dashboard/**/*.{ts,tsx}'],
    // The package's entry points alone publish the contract's names to the package's users.
    ignores: ['src/index.ts', 'src/worker-sdk/index.ts'],
    plugins: { house: { rules: { 'no-contract-reexport': noContractReexport } } },
    rules: { 'house/no-contract-reexport': 'error' },
  },
  { files: ['**/*.js', '**/*.mjs'], extends: [tseslint.configs.disableTypeChecked] },
  prettier,
);
