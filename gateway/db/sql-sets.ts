import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { sqlDir } from '../paths.js';

// Where the database's SQL is, set by set. Each set has versioned migrations (tables, columns,
// indexes, roles, grants, data: node-pg-migrate files, recorded by name in the set's table) and
// definitions (functions, triggers: files re-applied whenever their text changes, recorded by
// hash). sql/gateway/ is the gateway's own state, which any database Tally stands in front of
// needs; sql/app/ the finance app's, which builds on it. sql/extensions/NAME/ holds what a
// database with the extension NAME needs besides (today Citus): definitions applied before the
// app's migrations, after-each-migration.sql run inside each app migration, and after-migrate.sql
// run at the end of every migrate. The runner (migrate.ts) names no function of any of them.

export type MigrationSet = 'gateway' | 'app';

export interface SetFiles {
  name: MigrationSet;
  /** node-pg-migrate's files. */
  migrations: string;
  /** node-pg-migrate's table in schema tally_migrations. */
  table: string;
  /** How migrate() reports this set's migrations ("gateway/000_baseline"). */
  prefix: string;
  /** Definitions the migrations need (column defaults), applied before them. */
  early: string[];
  /** Definitions, applied after the set's migrations in file order. */
  definitions: string[];
  /** What brings a database migrated by the squashed history to the baseline (squashed.ts). */
  upgrade: string[];
}

export interface Extension {
  name: string;
  definitions: string[];
  afterEachMigration: string[];
  afterMigrate: string[];
}

const sqlFiles = (dir: string): string[] =>
  existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith('.sql'))
        .sort()
        .map((f) => join(dir, f))
    : [];

const optional = (file: string): string[] => (existsSync(file) ? [file] : []);

function setFiles(name: MigrationSet, table: string, prefix: string): SetFiles {
  const dir = join(sqlDir, name);
  return {
    name,
    migrations: join(dir, 'migrations'),
    table,
    prefix,
    early: optional(join(dir, 'defaults.sql')),
    definitions: sqlFiles(join(dir, 'definitions')),
    upgrade: optional(join(dir, 'upgrade-from-prerelease.sql')),
  };
}

export const SETS: Record<MigrationSet, SetFiles> = {
  gateway: setFiles('gateway', 'gateway_migrations', 'gateway/'),
  // The app's table keeps the name it had when it was the only set, so that a database
  // migrated then knows what it has.
  app: setFiles('app', 'pgmigrations', ''),
};

/** The folders of sql/extensions/, each applied where its extension is installed. */
export function extensions(): Extension[] {
  const root = join(sqlDir, 'extensions');
  if (!existsSync(root)) return [];
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()
    .map((name) => ({
      name,
      definitions: sqlFiles(join(root, name, 'definitions')),
      afterEachMigration: optional(join(root, name, 'after-each-migration.sql')),
      afterMigrate: optional(join(root, name, 'after-migrate.sql')),
    }));
}

/** A definition file's key in tally_migrations.definitions: its path below sql/. */
export const definitionKey = (file: string): string => file.slice(sqlDir.length + 1);
