// Lint: typescript-eslint's recommended type-checked rules over the TypeScript sources; promises nobody
// awaits or that are passed where a callback returns nothing are errors (an extension host loses
// their failures silently).
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'out/', 'out-*/', '.cache/', 'node_modules/', '**/*.mjs', '**/*.js'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
);
