import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot as root } from '../../gateway/paths.js';

// The engine serves any database: the dependency rules keep its imports free of the app
// (.dependency-cruiser.cjs), and this keeps its text free of it. Names of the finance app, of
// its roles, tokens and request check, and the codes of its surfaces' errors come to the engine
// from configuration (EngineConfig, GatewayOptions) or from the database, never from its source.

const APP_NAMES: [RegExp, string][] = [
  [/workspace_id/, "the app's tenant claim and column (EngineConfig.tenantClaim, tenantColumn)"],
  // The engine's own state is the tally schema's change version (changes.ts); nothing else there is its.
  [/\btally\.(?!change_version\(\))/, "a name in the app's schema"],
  [/\bTLY[12]\d\d\b/, "a code of the app's catalogue (gateway/errors.ts)"],
  [/\bapi_(read|write)\b/, "the app's roles (EngineConfig.apiRoles, readOnlyRoles)"],
  [/check_request/, "the app's pre-request function (EngineConfig.preRequest)"],
  [/\btally_(ws|pk)_/, "the app's token formats"],
];

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(`${dir}/${d.name}`) : d.name.endsWith('.ts') ? [`${dir}/${d.name}`] : [],
  );
}

describe('the engine', () => {
  it('names nothing of the app in its source: tenant claim, schema, roles, error codes, tokens', () => {
    const found: string[] = [];
    for (const path of sources('gateway/engine')) {
      const lines = readFileSync(join(root, path), 'utf8').split('\n');
      lines.forEach((line, i) => {
        for (const [name, what] of APP_NAMES) if (name.test(line)) found.push(`${path}:${i + 1}: ${what}`);
      });
    }
    expect(found).toEqual([]);
  });

  it('is checked by a test that finds an app name where one is written', () => {
    const caught = (text: string) => APP_NAMES.some(([name]) => name.test(text));
    expect(['claims.workspace_id', 'SELECT tally.check_request()', "'TLY100'", 'api_write'].map(caught)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(caught('SELECT tally.change_version() AS version')).toBe(false);
  });
});
