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

/** Runs a file of tests/fixtures as the database owner (roles are cluster-wide: created once). */
export async function loadFixture(admin: Sql, name: string): Promise<void> {
  const text = await readFile(new URL(`../fixtures/${name}`, import.meta.url), 'utf8');
  for (const role of ['blog_anon', 'blog_user']) {
    // Files run in parallel on one cluster: tolerate the other file creating the role first.
    await admin.unsafe(
      `DO $$ BEGIN CREATE ROLE ${role} NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
    );
  }
  await admin.unsafe(text.replace(/^CREATE ROLE .*$/gm, ''));
}
