// ESLint: typescript-eslint's recommended type-aware rules, plus the project's own rule that
// SQL is written in one module only (see docs/architecture.md, "SQL").
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const UNSAFE_CALL = {
  selector: "CallExpression[callee.property.name='unsafe']",
  message:
    'Build SQL with gateway/engine/sql.ts (sql``, param, ident, compile) and send it with its run(); unsafe() is for administrative scripts only.',
};
const SQL_STRING = {
  selector:
    ':not(TaggedTemplateExpression) > TemplateLiteral[quasis.0.value.raw=/^\\s*(SELECT|INSERT|UPDATE|DELETE|WITH|BEGIN|COMMIT|SET)\\b/]',
  message:
    'SQL in an untagged template string: build it with sql`` of gateway/engine/sql.ts (or a postgres.js tagged template), so values become parameters.',
};
const CATALOG_TEXT_IMPORT = {
  group: ['**/engine/sql.js'],
  importNames: ['catalogText'],
  message:
    'Only the schema cache loader (gateway/engine/schema-cache/load.ts) makes CatalogText, from what pg_catalog says.',
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.tally/**', 'gateway/settings/static/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      eqeqeq: ['error', 'smart'],
    },
  },
  // SQL is safe by construction: the engine builds every statement with gateway/engine/sql.ts
  // (fragments, parameters, quoted identifiers) and sends it through that module's run(), the
  // only unsafe() of the service. Elsewhere SQL is a postgres.js tagged template, whose holes
  // are parameters. Tests and the benchmark talk to the database directly and are not covered.
  {
    files: ['gateway/**/*.ts', 'mcp/**/*.ts'],
    ignores: ['gateway/engine/sql.ts'],
    rules: {
      'no-restricted-syntax': ['error', UNSAFE_CALL, SQL_STRING],
      'no-restricted-imports': ['error', { patterns: [CATALOG_TEXT_IMPORT] }],
    },
  },
  {
    // A long function hides its steps: split it into named ones that read as what it does. The
    // bound is what the longest function of the service had when it was set; lower it, never raise it.
    files: ['gateway/**/*.ts', 'mcp/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80 }] },
  },
  {
    // Administrative places that must send text postgres.js cannot parameterise: the migration
    // runner (files of SQL: definitions, policies), `tally sql` (a script the operator typed) and the embedded server's
    // CREATE DATABASE of a constant name. Untagged SQL strings stay refused there too.
    files: [
      'gateway/db/migrate.ts',
      'gateway/db/definitions.ts',
      'gateway/db/squashed.ts',
      'gateway/cli/db-access.ts',
      'gateway/db/embedded.ts',
    ],
    rules: { 'no-restricted-syntax': ['error', SQL_STRING] },
  },
  {
    // Catalog text is branded by the schema cache loader, which reads it from pg_catalog; the
    // unit tier's in-memory schema stands in for the loader.
    files: ['gateway/engine/schema-cache/load.ts', 'tests/unit/helpers/schema.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    // Plain JavaScript (configs, the test harness) is outside the TypeScript project: lint it
    // without type information.
    files: ['**/*.{js,mjs,cjs}'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, globals: globals.node },
  },
  { files: ['**/*.cjs'], languageOptions: { sourceType: 'commonjs' } },
);
