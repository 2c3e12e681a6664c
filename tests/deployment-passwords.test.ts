import { jest } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '../gateway/config.js';
import { packageRoot } from '../gateway/paths.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tally } from './harness/cli.js';
import { page } from './harness/docs.js';

// docker compose puts a password into a URL as it is: a base64 one (openssl rand -base64: / + =)
// made DATABASE_URL and TALLY_DB_URI invalid ("Invalid URL"). And the deployment steps made a
// workspace and a token but no publishable key, so /rest/v1 could not be used.
jest.setTimeout(180_000);

/** docker compose's interpolation of ${NAME:?message} and ${NAME:-default}, with these values. */
function interpolate(template: string, values: Record<string, string>): string {
  return template.replace(/\$\{([A-Z_]+)(?::[?-][^}]*)?\}/g, (_m, name: string) => values[name] ?? '');
}

describe('deployment URLs and steps', () => {
  let db: TestDatabase;
  let compose: { services: { tally: { environment: Record<string, string> } } };
  const password = 'Zk/8+Qm1aB/c9d=='; // what openssl rand -base64 gives, / + and = included
  const role = `deploy_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    compose = parse(await readFile(join(packageRoot, 'docker-compose.yml'), 'utf8')) as typeof compose;
    await db.admin.unsafe(`CREATE ROLE ${role} LOGIN SUPERUSER PASSWORD '${password}'`);
  });
  afterAll(async () => {
    await db.admin.unsafe(`DROP ROLE IF EXISTS ${role}`);
    await db.drop();
  });

  it("reads the compose file's URLs with a base64 password as that password", () => {
    const env = compose.services.tally.environment;
    const values = {
      POSTGRES_PASSWORD: password,
      TALLY_AUTHENTICATOR_PASSWORD: password,
      TALLY_JWT_SECRET: 'x'.repeat(44),
    };
    const config = loadConfig({
      DATABASE_URL: interpolate(env.DATABASE_URL!, values),
      TALLY_DB_URI: interpolate(env.TALLY_DB_URI!, values),
    });
    for (const url of [config.databaseUrl!, config.dbUri!]) {
      const parsed = new URL(url);
      expect(decodeURIComponent(parsed.password)).toBe(password);
      expect([parsed.hostname, parsed.port, parsed.pathname]).toEqual(['postgres', '5432', '/tally']);
    }
    // An encoded password is left as it is.
    const encoded = `postgres://u:${encodeURIComponent(password)}@h:5432/d`;
    expect(loadConfig({ DATABASE_URL: encoded }).databaseUrl).toBe(encoded);
  });

  it('runs the deployment steps of docs/deployment.md with such a password: a workspace, a token, a publishable key and the first owner', async () => {
    const owner = new URL(db.url);
    // The URL as compose writes it: the password as it is.
    const url = `postgres://${role}:${password}@${owner.host}${owner.pathname}`;
    const env = { DATABASE_URL: url, TALLY_JWT_SECRET: 'x'.repeat(44) };
    const steps = [
      ...page('docs/deployment.md').matchAll(/^docker compose exec tally node dist\/gateway\/cli\/main\.js (.+)$/gm),
    ].map((m) => m[1]!.split(' '));
    expect(steps.map((s) => s.slice(0, 2).join(' '))).toEqual([
      'workspace create',
      'token create',
      'key create',
      'member add',
    ]);
    for (const argv of steps) {
      const r = await tally(argv, env);
      expect([argv, r.code, r.stderr]).toEqual([argv, 0, '']);
      if (argv[0] === 'token') expect(r.lastLine).toMatch(/^tally_ws_/);
      if (argv[0] === 'key') expect(r.lastLine).toMatch(/^tally_pk_/);
      if (argv[0] === 'member') expect(r.stdout).toMatch(/one-time password/i);
    }
  });
});
