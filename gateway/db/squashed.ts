import { readFile } from 'node:fs/promises';
import type postgres from 'postgres';
import type { SetFiles } from './sql-sets.js';
import { splitStatements } from './sql-statements.js';

// The pre-release history, squashed into each set's 000_baseline. A database migrated by those
// files has their names in its migrations table: when all of them are there, they are replaced
// by the baseline's name, and the set's upgrade-from-prerelease.sql brings what differs to a
// fresh database's state, in the same transaction. Migrations added after the squash keep
// their names (168_…), so a database that ran them has them recorded as before. A database that stopped part of the way through them is
// refused: only the release it was migrated with knows how to finish.

const BASELINE = '000_baseline';

const SQUASHED: Record<SetFiles['name'], string[]> = {
  gateway: [
    '001_gateway_state',
    '095_change_version',
    '105_search_path_pg_temp_last',
    '109_schema_version_on_commit',
    '160_rate_limit_take_if_fits',
  ],
  app: [
    '001_roles_and_internal',
    '002_finance',
    '003_admin',
    '004_publishable_keys_check',
    '005_access',
    '020_settings',
    '021_settings_passwords',
    '030_lookup_change_notify',
    '040_fund_summary',
    '050_field_rules_in_database',
    '050_least_privilege',
    '051_fund_figures_linear',
    '052_failed_auth_atomic',
    '053_sign_in_throttle',
    '070_workspace_profile_and_spending',
    '090_functions_on_shards',
    '091_citus_api_roles',
    '095_lookups_watched_not_notified',
    '105_search_path_pg_temp_last',
    '106_fund_amount_bounds',
    '107_citus_placement',
    '108_citus_computed_fields_on_workers',
    '120_new_token_passes_failed_auth_block',
    '130_token_last_used_alone',
    '150_field_rules_of_every_surface',
    '161_activity',
    '162_prune_activity_on_citus',
    '163_idempotency_keys',
    '164_activity_token_name',
    '165_citus_role_secrets_per_cluster',
    '166_citus_local_shards',
    '167_citus_bound_shards',
  ],
};

/**
 * Migrations of the old layout that only replaced functions, folded into sql/app/definitions/
 * since: forgotten with the squashed names where a database ran them.
 */
const FOLDED: Record<SetFiles['name'], string[]> = { gateway: [], app: ['170_undo_lock_absent_record'] };

/** Replaces a complete pre-release history of the set by the baseline's name, and upgrades. */
export async function adoptSquashed(sql: postgres.Sql, set: SetFiles): Promise<void> {
  const [exists] = await sql<{ present: boolean }[]>`
    SELECT to_regclass(${'tally_migrations.' + set.table}) IS NOT NULL AS present`;
  if (!exists?.present) return;
  const names = (await sql<{ name: string }[]>`SELECT name FROM tally_migrations.${sql(set.table)}`).map((r) => r.name);
  const old = SQUASHED[set.name];
  if (!names.some((n) => old.includes(n))) return;
  const missing = old.filter((n) => !names.includes(n));
  if (missing.length > 0) {
    throw new Error(
      `the database was migrated by a pre-release of Tally that stopped before ${set.prefix}${missing[0]}: finish with that release's "tally migrate" first`,
    );
  }
  const upgrade = (await Promise.all(set.upgrade.map((f) => readFile(f, 'utf8')))).flatMap((t) => splitStatements(t));
  await sql.begin(async (tx) => {
    for (const statement of upgrade) await tx.unsafe(statement);
    await tx`DELETE FROM tally_migrations.${tx(set.table)} WHERE name = ANY (${[...old, ...FOLDED[set.name]]}::text[])`;
    await tx`INSERT INTO tally_migrations.${tx(set.table)} (name, run_on) VALUES (${BASELINE}, now())`;
  });
}
