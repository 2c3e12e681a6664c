import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { packageRoot } from '../gateway/paths.js';
import { present } from './harness/present.js';

// No Docker engine runs here: the compose file is checked to parse and to say what the README
// and the Dockerfile say (services, secrets from the environment, health checks on /readyz).

describe('deployment files', () => {
  it('docker-compose.yml runs Postgres and Tally with secrets from the environment and a /readyz health check', async () => {
    const text = await readFile(join(packageRoot, 'docker-compose.yml'), 'utf8');
    const compose = parse(text) as {
      services: Record<
        string,
        {
          environment?: Record<string, string>;
          healthcheck?: { test: string[] };
          depends_on?: Record<string, { condition: string }>;
          build?: string;
        }
      >;
    };
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

  it('the Dockerfile serves with a /readyz health check after migrating', async () => {
    const text = await readFile(join(packageRoot, 'Dockerfile'), 'utf8');
    expect(text).toMatch(/HEALTHCHECK .*\/readyz/);
    expect(text).toContain(
      'migrate && node dist/gateway/cli/main.js policies apply && exec node dist/gateway/cli/main.js serve',
    );
    expect(text).toMatch(/^USER node$/m);
  });

  it('the README names the compose file and both set-up commands', async () => {
    const readme = await readFile(join(packageRoot, 'README.md'), 'utf8');
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm test');
    expect(readme).toContain('docker compose up');
  });
});
