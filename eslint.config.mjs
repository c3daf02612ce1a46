// Lint: typescript-eslint's recommended type-checked rules over the TypeScript sources; promises nobody
// awaits or that are passed where a callback returns nothing are errors (an extension host loses
// their failures silently).
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'out/', 'out-*/', '.cache/', 'node_modules/', '**/*.mjs', '**/*.js', '**/*.cjs'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // Passing on what was caught, or an abort signal's reason, as it came is not throwing a non-error.
      '@typescript-eslint/only-throw-error': ['error', { allowThrowingUnknown: true }],
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true, allowThrowingAny: true }],
      // `_name` marks a parameter or a destructured part left out on purpose.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // The command line loads each command's file only when that command runs, and the tests and
    // benchmarks load optional modules (koffi) only where they are installed: `require` is the point.
    files: ['src/cli/main.ts', 'src/cli/commands.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Stand-ins for the extension's prompts and the benchmarks' parts keep the async signature of
    // what they replace, and the tests wrap methods to observe them.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/require-await': 'off', '@typescript-eslint/unbound-method': 'off' },
  },
);
