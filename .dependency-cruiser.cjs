// Import rules, checked by `npm run lint`: no cycles anywhere, and the engine (the generic
// PostgREST-style pipeline) imports nothing from the surfaces or the finance app around it.
const ENGINE = ['^gateway/engine/'];
// Everything around the engine: surfaces, authentication, administration, the command line,
// the server, the finance app's field rules and lookup lists; any new file outside the engine too.
const APP = '^(gateway/(?!engine/)|mcp/)';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle means two modules that cannot be understood, tested or moved apart.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'engine-knows-no-app',
      severity: 'error',
      comment:
        'The engine serves any database: it must not import auth, admin, settings, the wrapper, MCP, the CLI, the server or the finance app.',
      from: { path: ENGINE },
      to: { path: APP, pathNot: ENGINE },
    },
    {
      name: 'surfaces-plug-in',
      severity: 'error',
      comment: 'The server and the command line reach MCP (and any surface) through gateway/surfaces.ts, not directly.',
      from: { path: '^gateway/(server\\.ts$|cli/)' },
      to: { path: '^(mcp|gateway/(wrapper|settings))/' },
    },
    {
      name: 'errors-in-one-place',
      severity: 'error',
      comment:
        "Around the engine, errors are made and written through gateway/errors.ts (both catalogues, toApiError, writeError), never the engine's error modules directly.",
      from: { path: APP, pathNot: '^gateway/errors\\.ts$' },
      to: { path: '^gateway/engine/errors/' },
    },
    {
      name: 'admin-knows-no-surface',
      severity: 'error',
      comment:
        'Administration (workspaces, tokens, keys, members) is used by the surfaces and the CLI, never the other way round.',
      from: { path: '^gateway/admin/' },
      to: { path: '^(mcp|gateway/(settings|wrapper|rest|cli))/' },
    },
    {
      name: 'no-orphans',
      severity: 'error',
      comment: 'A source file nothing imports is dead code (entry points and tests excepted).',
      from: {
        orphan: true,
        pathNot: [
          '(^|/)\\.[^/]+\\.(js|cjs|mjs|ts|json)$',
          '\\.d\\.m?ts$',
          '^tests/',
          '^bench/',
          '^gateway/settings/static/',
          '^gateway/cli/main\\.ts$',
          'eslint\\.config\\.js$',
          'jest\\.config\\.js$',
        ],
      },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
      extensions: ['.ts', '.js'],
    },
  },
};
