// Import rules, checked by `npm run lint`: no cycles anywhere, and the engine (the generic
// PostgREST-style pipeline) imports nothing from the surfaces or the finance app around it.
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
      comment: 'The engine serves any database: it must not import auth, admin, settings, the wrapper, MCP, the CLI or the server.',
      from: { path: '^gateway/engine/' },
      to: { path: '^(gateway/(auth|admin|settings|wrapper|rest|cli|db|server|app)|mcp)/?' },
    },
    {
      name: 'no-orphans',
      severity: 'error',
      comment: 'A source file nothing imports is dead code (entry points and tests excepted).',
      from: { orphan: true, pathNot: ['(^|/)\\.[^/]+\\.(js|cjs|mjs|ts|json)$', '\\.d\\.ts$', '^tests/', '^bench/', '^gateway/settings/static/', '^gateway/cli/main\\.ts$', 'eslint\\.config\\.js$', 'jest\\.config\\.js$'] },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'], extensions: ['.ts', '.js'] },
  },
};
