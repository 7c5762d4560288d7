// Lint: type-aware TypeScript rules, plus the workflow sandbox rule (workflow code is bundled into
// Temporal's deterministic sandbox: no Node built-ins, no I/O clients, no RMS or DB modules).
import { builtinModules } from 'node:module';
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const nodeBuiltins = builtinModules.flatMap((m) => [m, `node:${m}`]);

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.build/', '.build.*/', '.tools/', '.data/', 'bench/results/', 'test-results/', '.api-dts/', 'examples/*/node_modules/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['eslint.config.mjs', 'scripts/*.mjs', 'test/helpers/*.cjs', 'bin/*.cjs'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { prefer: 'type-imports', fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // The bench's workflow code runs in the same sandbox (bench/workflows.ts, the hand-written baseline's).
    files: ['src/workflows/**/*.ts', 'bench/workflows.ts', 'bench/baseline-workflow.ts', 'bench/baseline-shared.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...nodeBuiltins.map((name) => ({ name, message: 'Workflow code runs in the Temporal sandbox: no Node built-ins.' })),
            { name: 'ioredis', message: 'Workflows do no I/O: call an activity.' },
            { name: 'pg', message: 'Workflows do no I/O: call an activity.' },
          ],
          patterns: [
            { group: ['**/rms', '**/rms/**', '**/db', '**/db/**'], message: 'Workflows do no I/O: call an activity.' },
            { group: ['**/activities', '**/activities/**'], allowTypeImports: true, message: 'Import activities by type only.' },
          ],
        },
      ],
    },
  },
  {
    // Asymmetric matchers (expect.any, expect.stringMatching) are typed `any` by design.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-unsafe-assignment': 'off' },
  },
  {
    files: ['**/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: globals.node },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
