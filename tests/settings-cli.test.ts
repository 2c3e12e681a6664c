import { jest } from '@jest/globals';
import { checkPassword } from '../gateway/admin/passwords.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { tally } from './harness/cli.js';
import { workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { first, present } from './harness/present.js';

// Each test or hook here starts the CLI through tsx (five in a row took 30 s of jest's default
// 60 s on a loaded 2-core machine): the timeout is a safety net, as in cli.test.ts.
jest.setTimeout(180_000);

// `tally member add`: how an operator gives people access to the settings pages.

describe('tally member add', () => {
  let db: TestDatabase;
  let ws: WorkspaceFixture;
  let other: WorkspaceFixture;
  let env: Record<string, string>;
  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'Member Test');
    other = await workspaceWithData(db.admin, 'Member Test Two');
    env = { DATABASE_URL: db.url, TALLY_JWT_SECRET: 'x'.repeat(32) };
  });
  afterAll(() => db.drop());

  const credentialsOf = async (email: string) =>
    (
      await db.admin<{ id: string; email: string; password_hash: string }[]>`
      SELECT id, email, password_hash FROM public.user_credentials WHERE lower(email) = lower(${email})`
    )[0];
  const userOf = async (email: string) => present(await credentialsOf(email), `the user ${email}`);
  const roleOf = async (userId: string, workspaceId: string) =>
    (
      await db.admin`SELECT role FROM public.workspace_members WHERE user_id = ${userId} AND workspace_id = ${workspaceId}`
    )[0]?.role;

  it('adds a new member with a one-time password printed last, stored only as an argon2id hash, and audited', async () => {
    const r = await tally(
      ['member', 'add', '--workspace', 'Member Test', '--email', 'Olga@Example.com', '--role', 'owner'],
      env,
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('added new member olga@example.com as owner of workspace "Member Test"');
    const password = r.lastLine;
    expect(password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    const user = await userOf('olga@example.com');
    expect(user.email).toBe('olga@example.com');
    expect(user.password_hash).toMatch(/^\$argon2id\$/);
    expect(user.password_hash).not.toContain(password);
    expect(await checkPassword(user.password_hash, password)).toBe(true);
    expect(await checkPassword(user.password_hash, password + 'x')).toBe(false);
    // One-time: the member must choose their own at the first sign-in.
    expect(
      first(await db.admin`SELECT password_temporary FROM public.user_credentials WHERE id = ${user.id}`)
        .password_temporary,
    ).toBe(true);
    expect(await roleOf(user.id, ws.id)).toBe('owner');
    const [entry] =
      await db.admin`SELECT actor, details FROM tally.audit_log WHERE workspace_id = ${ws.id} AND action = 'member.add'`;
    expect(entry).toEqual({
      actor: 'cli',
      details: { email: 'olga@example.com', role: 'owner', user_created: true, password_set: true },
    });
  });

  it('takes the password from standard input when one is piped', async () => {
    const r = await tally(
      ['member', 'add', '--workspace', ws.id, '--email', 'piet@example.com', '--role', 'member'],
      env,
      'a chosen passphrase\n',
    );
    expect(r.code).toBe(0);
    expect(r.lastLine).toBe(
      'added new member piet@example.com as member of workspace "Member Test"; password set from standard input',
    );
    const user = await userOf('piet@example.com');
    expect(await checkPassword(user.password_hash, 'a chosen passphrase')).toBe(true);
    expect(
      first(await db.admin`SELECT password_temporary FROM public.user_credentials WHERE id = ${user.id}`)
        .password_temporary,
    ).toBe(false);
  });

  it('adds a known person to another workspace keeping their password, or changes their role', async () => {
    const before = await userOf('olga@example.com');
    const r = await tally(
      ['member', 'add', '--workspace', 'Member Test Two', '--email', 'olga@example.com', '--role', 'admin'],
      env,
    );
    expect(r.code).toBe(0);
    expect(r.lastLine).toBe(
      'added member olga@example.com as admin of workspace "Member Test Two"; they keep their password',
    );
    expect((await userOf('olga@example.com')).password_hash).toBe(before.password_hash);
    expect(await roleOf(before.id, other.id)).toBe('admin');
    await tally(
      ['member', 'add', '--workspace', 'Member Test Two', '--email', 'olga@example.com', '--role', 'member'],
      env,
    );
    expect(await roleOf(before.id, other.id)).toBe('member');
    expect(await roleOf(before.id, ws.id)).toBe('owner');
  });

  it("replaces a known person's password from standard input and ends their sessions", async () => {
    const user = await userOf('piet@example.com');
    await db.admin`INSERT INTO tally.settings_sessions (token_hash, user_id, csrf_token, expires_at)
                   VALUES (${Buffer.alloc(32, 7)}, ${user.id}, ${'c'.repeat(43)}, now() + interval '1 hour')`;
    const r = await tally(
      ['member', 'add', '--workspace', ws.id, '--email', 'piet@example.com', '--role', 'member'],
      env,
      'another passphrase',
    );
    expect(r.code).toBe(0);
    expect(await checkPassword((await userOf('piet@example.com')).password_hash, 'another passphrase')).toBe(true);
    expect(await db.admin`SELECT 1 FROM tally.settings_sessions WHERE user_id = ${user.id}`).toHaveLength(0);
  });

  it('refuses a bad role, email, short password or unknown workspace in one line', async () => {
    const cases: [string[], string | undefined, string][] = [
      [
        ['--workspace', 'Member Test', '--email', 'x@example.com', '--role', 'boss'],
        undefined,
        'tally: role must be owner, admin or member, got "boss"',
      ],
      [
        ['--workspace', 'Member Test', '--email', 'not-an-email', '--role', 'member'],
        undefined,
        'tally: "not-an-email" is not an email address',
      ],
      [
        ['--workspace', 'Member Test', '--email', 'x@example.com', '--role', 'member'],
        'short\n',
        'tally: a password has at least 12 characters',
      ],
      [
        ['--workspace', 'Nowhere', '--email', 'x@example.com', '--role', 'member'],
        undefined,
        'tally: unknown workspace "Nowhere"',
      ],
    ];
    for (const [argv, input, message] of cases) {
      const r = await tally(['member', 'add', ...argv], env, input);
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(message);
    }
    const missing = await tally(['member', 'add', '--workspace', 'Member Test', '--role', 'member'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('--email is required');
    expect(await credentialsOf('x@example.com')).toBeUndefined();
  });
});
