import { readFile } from 'node:fs/promises';
import type { Sql } from 'postgres';

// Helpers of the /rest/v1 suites: the publishable key every request carries, and fixture SQL.

export const TEST_API_KEY = 'test-publishable-key';

/**
 * Env for startTestApp: the test's publishable key plus any overrides. These suites send far
 * more than 60 requests a minute with one token; the limit itself is proven in
 * access-ratelimit.test.ts, so it is lifted here.
 */
export function restEnv(env: Record<string, string> = {}): Record<string, string> {
  return { TALLY_PUBLISHABLE_KEYS: TEST_API_KEY, TALLY_RATE_LIMIT_PER_MINUTE: '100000', ...env };
}

/** Runs a file of tests/fixtures as the database owner. */
export async function loadFixture(admin: Sql, name: string): Promise<void> {
  await runFixture(admin, await fixtureText(name));
}

/** The SQL of a file of tests/fixtures. */
export function fixtureText(name: string): Promise<string> {
  return readFile(new URL(`../fixtures/${name}`, import.meta.url), 'utf8');
}

/**
 * Fixture SQL as the database owner. Its roles, and their grants to the server's login, are the
 * cluster's, shared by every file's database: each is made alone, committed at once, and one
 * that another file made first is taken as made. (Run inside the fixture's transaction, a GRANT
 * that waited for another file's same GRANT failed on Postgres 15 with a unique violation on
 * pg_auth_members once that one committed.)
 */
export async function runFixture(admin: Sql, text: string, login = 'authenticator'): Promise<void> {
  const clusterWide = new RegExp(`^(CREATE ROLE \\w+ NOLOGIN|GRANT [\\w, ]+ TO ${login});$`, 'gm');
  for (const [, statement] of text.matchAll(clusterWide)) {
    await admin.unsafe(
      `DO $$ BEGIN ${statement}; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
    );
  }
  await admin.unsafe(text.replace(clusterWide, ''));
}
