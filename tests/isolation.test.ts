import { asRole, createTestDatabase, onCitus, sqlState, type TestDatabase } from './harness/db.js';
import { TENANT_TABLES, tenantTablesOf, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { first } from './harness/present.js';

// Row-level security at the SQL level: a request of workspace A, as the gateway runs it (API
// role + JWT claims in one transaction), never sees, changes or points into workspace B.

const INTERNAL_TABLES = [
  'workspaces',
  'workspace_members',
  'user_credentials',
  'billing_accounts',
  'api_tokens',
  'publishable_keys',
];

describe('workspace isolation in the database', () => {
  let db: TestDatabase;
  let a: WorkspaceFixture;
  let b: WorkspaceFixture;
  const claimsOf = (ws: WorkspaceFixture) => ({ workspace_id: ws.id });

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await workspaceWithData(db.admin, 'Alpha');
    b = await workspaceWithData(db.admin, 'Beta');
  });
  afterAll(() => db.drop());

  it("iterates over the database's tenant tables, every one", async () => {
    expect(await tenantTablesOf(db.admin)).toEqual(TENANT_TABLES);
  });

  it.each(TENANT_TABLES)('%s: the claims of A see only rows of A', async (table) => {
    const rows = await asRole(
      db.admin,
      'api_read',
      claimsOf(a),
      (tx) => tx`SELECT workspace_id FROM ${tx('public')}.${tx(table)}`,
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(new Set(rows.map((r) => r.workspace_id))).toEqual(new Set([a.id]));
  });

  // Any column would do: the workspace_id every tenant table has, set to what it is.
  it.each(TENANT_TABLES)('%s: rows of B are neither updatable nor deletable by A', async (table) => {
    const countOfB = async () =>
      first(
        await db.admin`SELECT count(*)::int AS count FROM ${db.admin('public')}.${db.admin(table)} WHERE workspace_id = ${b.id}`,
      ).count as number;
    const before = await countOfB();
    // A table api_write may not change at all (the activity log) refuses it outright.
    const changed = async (statement: 'update' | 'delete'): Promise<number> => {
      // UPDATE may be granted on some columns only (contacts): any of them makes the statement run.
      const writable = first(
        statement === 'update'
          ? await db.admin`SELECT has_any_column_privilege('api_write', ${'public.' + table}, 'UPDATE') AS ok`
          : await db.admin`SELECT has_table_privilege('api_write', ${'public.' + table}, 'DELETE') AS ok`,
      ).ok as boolean;
      const run = () =>
        asRole(
          db.admin,
          'api_write',
          claimsOf(a),
          (tx) =>
            statement === 'update'
              ? tx`UPDATE ${tx('public')}.${tx(table)} SET workspace_id = workspace_id WHERE workspace_id = ${b.id}`
              : tx`DELETE FROM ${tx('public')}.${tx(table)} WHERE workspace_id = ${b.id}`,
          { commit: true },
        );
      if (!writable) return (await sqlState(run())) === '42501' ? 0 : -1;
      return (await run()).count;
    };
    expect(await changed('update')).toBe(0);
    expect(await changed('delete')).toBe(0);
    expect(before).toBeGreaterThan(0);
    expect(await countOfB()).toBe(before);
  });

  it('an insert without workspace_id lands in the workspace of the claim', async () => {
    const row = first(
      await asRole(
        db.admin,
        'api_write',
        claimsOf(a),
        (tx) => tx`INSERT INTO public.contacts (name) VALUES ('Defaulted') RETURNING workspace_id`,
      ),
    );
    expect(row.workspace_id).toBe(a.id);
  });

  it('an insert naming workspace B is refused by the policy', async () => {
    const state = await sqlState(
      asRole(
        db.admin,
        'api_write',
        claimsOf(a),
        (tx) => tx`INSERT INTO public.contacts (workspace_id, name) VALUES (${b.id}, 'Intruder')`,
      ),
    );
    expect(state).toBe('42501'); // new row violates row-level security policy
  });

  it('moving a row of A into workspace B is refused', async () => {
    const state = await sqlState(
      asRole(
        db.admin,
        'api_write',
        claimsOf(a),
        (tx) => tx`UPDATE public.contacts SET workspace_id = ${b.id} WHERE id = ${a.contactId}`,
        { commit: true },
      ),
    );
    expect(state).toBe(onCitus ? '0A000' : '42501');
    expect((await db.admin`SELECT workspace_id FROM public.contacts WHERE id = ${a.contactId}`)[0]?.workspace_id).toBe(
      a.id,
    );
  });

  it("a fund transaction of A pointing at B's fund fails the composite foreign key", async () => {
    const state = await sqlState(
      asRole(
        db.admin,
        'api_write',
        claimsOf(a),
        (tx) =>
          tx`INSERT INTO public.fund_transactions (fund_id, name, amount, category_id, method_id)
         VALUES (${b.fundId}, 'Sneaky', 10, 'fund-income', 'cash')`,
      ),
    );
    expect(state).toBe('23503');
  });

  it("a participant link of A to B's contact fails the composite foreign key", async () => {
    const state = await sqlState(
      asRole(
        db.admin,
        'api_write',
        claimsOf(a),
        (tx) => tx`INSERT INTO public.fund_participants (fund_id, contact_id) VALUES (${a.fundId}, ${b.contactId})`,
      ),
    );
    expect(state).toBe('23503');
  });

  it("the computed balance of A's fund sums only A's transactions", async () => {
    const row = first(
      await asRole(
        db.admin,
        'api_read',
        claimsOf(a),
        // The row as a value of the table's type, as the engine passes it: on Citus a whole-row
        // reference `balance(f)` would be of the shard's type, which has no such function.
        (tx) => tx`SELECT public.balance(ROW(f.*)::public.funds) AS balance FROM public.funds f WHERE id = ${a.fundId}`,
      ),
    );
    expect(Number(row.balance)).toBe(100);
  });

  it.each(TENANT_TABLES)('%s: api_read cannot write', async (table) => {
    expect(
      await sqlState(asRole(db.admin, 'api_read', claimsOf(a), (tx) => tx`DELETE FROM ${tx('public')}.${tx(table)}`)),
    ).toBe('42501');
  });

  it('api_read cannot insert an expense', async () => {
    expect(
      await sqlState(
        asRole(
          db.admin,
          'api_read',
          claimsOf(a),
          (tx) =>
            tx`INSERT INTO public.personal_transactions (name, amount, category_id, method_id) VALUES ('x', 1, 'other', 'cash')`,
        ),
      ),
    ).toBe('42501');
  });

  it.each(TENANT_TABLES)('%s: anon has no privilege at all', async (table) => {
    expect(await sqlState(asRole(db.admin, 'anon', null, (tx) => tx`SELECT 1 FROM ${tx('public')}.${tx(table)}`))).toBe(
      '42501',
    );
  });

  it('an API role without a workspace claim sees no row', async () => {
    const rows = await asRole(db.admin, 'api_read', {}, (tx) => tx`SELECT 1 FROM public.personal_transactions`);
    expect(rows).toHaveLength(0);
  });

  it.each(INTERNAL_TABLES.flatMap((t) => ['anon', 'api_read', 'api_write'].map((role) => [t, role])))(
    'internal table %s: permission denied for %s',
    async (table, role) => {
      expect(
        await sqlState(asRole(db.admin, role, claimsOf(a), (tx) => tx`SELECT 1 FROM ${tx('public')}.${tx(table)}`)),
      ).toBe('42501');
    },
  );

  it('the authenticator role itself holds no table privilege', async () => {
    expect(
      await sqlState(asRole(db.admin, 'authenticator', null, (tx) => tx`SELECT 1 FROM public.personal_transactions`)),
    ).toBe('42501');
  });
});

describe('the pre-request check', () => {
  let db: TestDatabase;
  let a: WorkspaceFixture;
  beforeAll(async () => {
    db = await createTestDatabase();
    a = await workspaceWithData(db.admin, 'Gamma');
  });
  afterAll(() => db.drop());

  // Claims as an access token carries them (with an expiry), as the API role api_read.
  const check = (claims: Record<string, unknown>, role = 'api_read') =>
    asRole(
      db.admin,
      role,
      { exp: Math.floor(Date.now() / 1000) + 60, ...claims },
      (tx) => tx`SELECT tally.check_request()`,
    );

  it('passes for an active token of a workspace whose API is on, and for no token at all', async () => {
    const { id } = first(
      await db.admin`INSERT INTO public.api_tokens (workspace_id, scope, token_hash) VALUES (${a.id}, 'read', ${Buffer.alloc(32, 1)}) RETURNING id`,
    );
    await expect(check({ workspace_id: a.id, sub: id })).resolves.toBeDefined();
    await expect(check({}, 'anon')).resolves.toBeDefined();
  });

  it('raises PT401 for a revoked or unknown token, and for a token of another workspace', async () => {
    const { id } = first(
      await db.admin`INSERT INTO public.api_tokens (workspace_id, scope, token_hash, revoked_at) VALUES (${a.id}, 'read', ${Buffer.alloc(32, 2)}, now()) RETURNING id`,
    );
    expect(await sqlState(check({ workspace_id: a.id, sub: id }))).toBe('PT401');
    expect(await sqlState(check({ workspace_id: a.id, sub: '00000000-0000-0000-0000-000000000000' }))).toBe('PT401');
    expect(await sqlState(check({ workspace_id: a.id, sub: 'not-a-uuid' }))).toBe('PT401');
    const { id: live } = first(
      await db.admin`INSERT INTO public.api_tokens (workspace_id, scope, token_hash) VALUES (${a.id}, 'read', ${Buffer.alloc(32, 3)}) RETURNING id`,
    );
    expect(await sqlState(check({ workspace_id: '00000000-0000-0000-0000-000000000001', sub: live }))).toBe('PT401');
  });

  it('raises PT403 when the workspace API switch is off', async () => {
    const { id } = first(
      await db.admin`INSERT INTO public.api_tokens (workspace_id, scope, token_hash) VALUES (${a.id}, 'write', ${Buffer.alloc(32, 4)}) RETURNING id`,
    );
    await db.admin`UPDATE public.workspaces SET api_enabled = false WHERE id = ${a.id}`;
    try {
      expect(await sqlState(check({ workspace_id: a.id, sub: id }))).toBe('PT403');
    } finally {
      await db.admin`UPDATE public.workspaces SET api_enabled = true WHERE id = ${a.id}`;
    }
  });
});
