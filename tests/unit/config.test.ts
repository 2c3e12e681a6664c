// The configuration (gateway/config.ts): every variable parsed in one place, a bad value refused
// with one line naming it, and the configuration table of docs/configuration.md listing exactly
// these variables.

import { ConfigError, loadConfig, SETTINGS } from '../../gateway/config.js';
import { section } from '../harness/docs.js';

const refusal = (env: Record<string, string>): string => {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected the configuration to be refused');
};

/** The variables of the table under "## Variables" in docs/configuration.md. */
function documentedVariables(): string[] {
  return section('docs/configuration.md', '## Variables')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...line.split('|')[1]!.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!));
}

describe('configuration', () => {
  it('is the table of docs/configuration.md: one row for every variable read, and no other', () => {
    expect([...documentedVariables()].sort()).toEqual([...SETTINGS].sort());
  });

  it('reads a switch as true/false, 1/0, yes/no or on/off, and refuses anything else by name', () => {
    for (const [value, on] of [
      ['true', true],
      ['1', true],
      ['YES', true],
      ['on', true],
      ['false', false],
      ['0', false],
      ['no', false],
      ['Off', false],
      ['', false],
    ] as const) {
      expect(loadConfig({ TALLY_TRUST_PROXY: value }).trustProxy).toBe(on);
    }
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(refusal({ TALLY_TRUST_PROXY: 'enabled' })).toBe(
      'TALLY_TRUST_PROXY must be one of true, 1, yes, on, false, 0, no, off, got "enabled"',
    );
    expect(refusal({ TALLY_DB_PREPARED_STATEMENTS: 'nope' })).toMatch(/^TALLY_DB_PREPARED_STATEMENTS must be one of /);
  });

  it('trusts the proxy with TALLY_TRUST_PROXY=true, and then sets no connection limit by default', () => {
    const behind = loadConfig({ TALLY_TRUST_PROXY: 'true' });
    expect(behind).toMatchObject({ trustProxy: true, httpConnectionsPerAddress: 0 });
    expect(loadConfig({}).httpConnectionsPerAddress).toBe(256);
  });

  it('takes the log level from LOG_LEVEL, one of pino levels', () => {
    expect(loadConfig({}).logLevel).toBe('info');
    expect(loadConfig({ LOG_LEVEL: 'warn' }).logLevel).toBe('warn');
    expect(refusal({ LOG_LEVEL: 'loud' })).toBe(
      'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    );
  });

  it('refuses numbers out of range or not whole, in one line', () => {
    expect(refusal({ PORT: 'eighty' })).toBe('PORT must be a whole number from 0 to 65535, got "eighty"');
    expect(refusal({ TALLY_DB_POOL: '0' })).toBe('TALLY_DB_POOL must be from 1 to 1000, got "0"');
    expect(refusal({ TALLY_DB_POOL: '4', TALLY_DB_POOL_RESERVED: '4' })).toBe(
      'TALLY_DB_POOL_RESERVED must be from 0 to 3 (TALLY_DB_POOL − 1), got "4"',
    );
    expect(refusal({ TALLY_HTTP_HEADERS_TIMEOUT_MS: '5000', TALLY_HTTP_REQUEST_TIMEOUT_MS: '1000' })).toMatch(
      /^TALLY_HTTP_REQUEST_TIMEOUT_MS must be at least TALLY_HTTP_HEADERS_TIMEOUT_MS/,
    );
    expect(refusal({ TALLY_DB_POOL_PER_TOKEN: '2' })).toMatch(
      /^TALLY_DB_POOL_PER_TOKEN is now TALLY_DB_POOL_PER_TENANT/,
    );
  });

  it('never repeats a secret or a URL with a password in its refusal', () => {
    expect(refusal({ TALLY_JWT_SECRET: 'short-secret' })).toBe('TALLY_JWT_SECRET must be at least 32 characters long');
    expect(refusal({ DATABASE_URL: 'mysql://u:hunter2@h/db' })).toBe(
      'DATABASE_URL must be a postgres:// or postgresql:// URL',
    );
  });

  it('keeps the defaults it had', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      home: '.tally',
      port: 3000,
      host: '127.0.0.1',
      schemas: ['public'],
      anonRole: 'anon',
      apiRoles: ['anon', 'api_read', 'api_write'],
      readOnlyRoles: ['api_read'],
      preRequest: 'tally.check_request',
      rateLimitPerMinute: 600,
      poolSize: 10,
      poolReserved: 2,
      poolPerTenant: 4,
      tenantClaim: 'workspace_id',
      tenantColumn: 'workspace_id',
      workMem: '4MB',
      aggregatesEnabled: false,
      planEnabled: false,
      preparedStatements: true,
    });
    expect(config.given.size).toBe(0);
    expect(loadConfig({ TALLY_DB_PRE_REQUEST: '', TALLY_DB_TENANT_COLUMN: '' })).toMatchObject({
      preRequest: undefined,
      tenantColumn: undefined,
    });
    expect(loadConfig({ DATABASE_URL: 'postgres://u:p@h/db' }).rateLimitPerMinute).toBe(60);
    expect([...loadConfig({ TALLY_HOME: '/x', PORT: ' ' }).given]).toEqual(['TALLY_HOME']);
  });
});
