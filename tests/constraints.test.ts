import type { Sql } from 'postgres';
import { asRole, createTestDatabase, type TestDatabase } from './harness/db.js';
import { workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { first } from './harness/present.js';

// The finance rules are enforced by the database itself, whatever surface writes.

describe('constraints of the finance schema', () => {
  let db: TestDatabase;
  let ws: WorkspaceFixture;
  beforeAll(async () => {
    db = await createTestDatabase();
    ws = await workspaceWithData(db.admin, 'Constraints');
  });
  afterAll(() => db.drop());

  /** Runs one insert as api_write of the workspace; resolves with the error (code, constraint, message). */
  async function failure(
    fn: (tx: Sql) => Promise<unknown>,
  ): Promise<{ code: string; constraint?: string; column?: string; message: string }> {
    try {
      await asRole(db.admin, 'api_write', { workspace_id: ws.id }, (tx) => fn(tx as unknown as Sql));
    } catch (err) {
      const e = err as { code: string; constraint_name?: string; column_name?: string; message: string };
      return { code: e.code, constraint: e.constraint_name, column: e.column_name, message: e.message };
    }
    throw new Error('expected the insert to fail');
  }

  const expense = (tx: Sql, fields: Record<string, unknown>) =>
    tx`INSERT INTO public.personal_transactions ${tx({ name: 'Lunch', amount: 10, category_id: 'food-drinks', method_id: 'cash', ...fields })}`;
  const fundTx = (tx: Sql, fields: Record<string, unknown>) =>
    tx`INSERT INTO public.fund_transactions ${tx({ fund_id: ws.fundId, name: 'Deposit', amount: 10, category_id: 'fund-income', method_id: 'cash', ...fields })}`;
  const fund = (tx: Sql, fields: Record<string, unknown>) =>
    tx`INSERT INTO public.funds ${tx({ name: 'Trip', ...fields })}`;

  it('seeds exactly the documented categories and methods', async () => {
    const expenses = await db.admin`SELECT id FROM public.categories WHERE for_expenses ORDER BY id`;
    const funds = await db.admin`SELECT id FROM public.categories WHERE for_funds ORDER BY id`;
    const methods = await db.admin`SELECT id FROM public.payment_methods ORDER BY id`;
    expect(expenses.map((r) => r.id)).toEqual([
      'beauty-care',
      'clothing',
      'credit-repayment',
      'entertainment',
      'essentials',
      'family-support',
      'fixed-expenses',
      'food-drinks',
      'installment-payment',
      'investments',
      'local-transport',
      'other',
      'sports',
      'travel',
      'work-expenses',
    ]);
    expect(funds.map((r) => r.id)).toEqual([
      'clothing',
      'currency-exchange',
      'entertainment',
      'fine',
      'flight-tickets',
      'food-drinks',
      'fund-income',
      'hotel',
      'local-transport',
      'other',
      'refund',
    ]);
    expect(methods.map((r) => r.id)).toEqual(['bank-transfer', 'cash', 'credit-card', 'installment', 'mobile-wallet']);
  });

  it('a valid expense gets an id, the default occurred_at and the workspace of the claim', async () => {
    const row = first(
      await asRole(
        db.admin,
        'api_write',
        { workspace_id: ws.id },
        (tx) =>
          tx`INSERT INTO public.personal_transactions (name, amount, category_id, method_id) VALUES ('Tea', 3.2, 'food-drinks', 'cash')
         RETURNING id, workspace_id, occurred_at, note`,
      ),
    );
    expect(row.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(row.workspace_id).toBe(ws.id);
    expect(Math.abs(new Date(row.occurred_at).getTime() - Date.now())).toBeLessThan(60_000);
    expect(row.note).toBeNull();
  });

  describe('expenses', () => {
    it.each([[0], [-5]])('refuse amount %p: it must be positive', async (amount) => {
      expect(await failure((tx) => expense(tx, { amount }))).toMatchObject({
        code: '23514',
        constraint: 'personal_transactions_amount_positive',
      });
    });
    it('refuse an amount of 1e12 or with more than 4 decimals', async () => {
      expect(await failure((tx) => expense(tx, { amount: 1e12 }))).toMatchObject({
        code: '23514',
        constraint: 'personal_transactions_amount_bounds',
      });
      expect(await failure((tx) => expense(tx, { amount: '1.00001' }))).toMatchObject({
        code: '23514',
        constraint: 'personal_transactions_amount_bounds',
      });
    });
    it('refuse an empty name and one of 256 characters, accept 255', async () => {
      expect(await failure((tx) => expense(tx, { name: '' }))).toMatchObject({
        code: '23514',
        constraint: 'personal_transactions_name_length',
      });
      expect(await failure((tx) => expense(tx, { name: 'x'.repeat(256) }))).toMatchObject({
        code: '23514',
        constraint: 'personal_transactions_name_length',
      });
      await asRole(db.admin, 'api_write', { workspace_id: ws.id }, (tx) =>
        expense(tx as unknown as Sql, { name: 'x'.repeat(255) }),
      );
    });
    it('refuse missing required fields', async () => {
      for (const field of ['name', 'amount', 'category_id', 'method_id']) {
        const e = await failure((tx) => expense(tx, { [field]: null }));
        expect(e).toMatchObject({ code: '23502', column: field });
      }
    });
    it('refuse an unknown category, naming category_id', async () => {
      const e = await failure((tx) => expense(tx, { category_id: 'yachts' }));
      expect(e.code).toBe('23514');
      expect(e.column).toBe('category_id');
      expect(e.message).toContain('category_id "yachts" is not a known category');
    });
    it('refuse a category offered only to funds', async () => {
      const e = await failure((tx) => expense(tx, { category_id: 'hotel' }));
      expect(e).toMatchObject({
        code: '23514',
        column: 'category_id',
        constraint: 'personal_transactions_category_id_fkey',
      });
      expect(e.message).toContain('not offered to expenses');
    });
    it('refuse an unknown payment method, naming method_id', async () => {
      const e = await failure((tx) => expense(tx, { method_id: 'barter' }));
      expect(e).toMatchObject({
        code: '23514',
        column: 'method_id',
        constraint: 'personal_transactions_method_id_fkey',
      });
    });
    it('refuse changing the category of an expense to a fund-only one', async () => {
      const e = await failure(
        (tx) => tx`UPDATE public.personal_transactions SET category_id = 'refund' WHERE id = ${ws.expenseId}`,
      );
      expect(e).toMatchObject({ code: '23514', column: 'category_id' });
    });
    it('accept a category inserted later (lists grow without a release)', async () => {
      await db.admin`INSERT INTO public.categories (id, name, for_expenses) VALUES ('pets', 'Pets', true)`;
      await asRole(db.admin, 'api_write', { workspace_id: ws.id }, (tx) =>
        expense(tx as unknown as Sql, { category_id: 'pets' }),
      );
    });
  });

  describe('fund transactions', () => {
    it('refuse a zero amount and accept negative (expense) and positive (income)', async () => {
      expect(await failure((tx) => fundTx(tx, { amount: 0 }))).toMatchObject({
        code: '23514',
        constraint: 'fund_transactions_amount_not_zero',
      });
      await asRole(db.admin, 'api_write', { workspace_id: ws.id }, async (tx) => {
        await fundTx(tx as unknown as Sql, { amount: -40, category_id: 'hotel' });
        await fundTx(tx as unknown as Sql, { amount: 40 });
      });
    });
    it('refuse a category offered only to expenses', async () => {
      const e = await failure((tx) => fundTx(tx, { category_id: 'investments' }));
      expect(e).toMatchObject({
        code: '23514',
        column: 'category_id',
        constraint: 'fund_transactions_category_id_fkey',
      });
      expect(e.message).toContain('not offered to funds');
    });
    it('accept clothing, which both lists offer', async () => {
      await asRole(db.admin, 'api_write', { workspace_id: ws.id }, (tx) =>
        fundTx(tx as unknown as Sql, { amount: -20, category_id: 'clothing' }),
      );
    });
    it('refuse an unknown fund', async () => {
      expect(await failure((tx) => fundTx(tx, { fund_id: '00000000-0000-0000-0000-000000000000' }))).toMatchObject({
        code: '23503',
        constraint: 'fund_transactions_fund_id_fkey',
      });
    });
    it('refuse an unknown payment method', async () => {
      expect(await failure((tx) => fundTx(tx, { method_id: 'gold' }))).toMatchObject({
        code: '23514',
        constraint: 'fund_transactions_method_id_fkey',
      });
    });
  });

  describe('funds', () => {
    it('default to status Upcoming, kind Travel and the workspace currency', async () => {
      const [row] = await asRole(
        db.admin,
        'api_write',
        { workspace_id: ws.id },
        (tx) => tx`INSERT INTO public.funds (name) VALUES ('Defaults') RETURNING status, kind, currency`,
      );
      expect(row).toEqual({ status: 'Upcoming', kind: 'Travel', currency: 'EUR' });
    });
    it('refuse an unknown status or kind', async () => {
      expect(await failure((tx) => fund(tx, { status: 'Cancelled' }))).toMatchObject({
        code: '23514',
        constraint: 'funds_status_check',
      });
      expect(await failure((tx) => fund(tx, { kind: 'Sailing' }))).toMatchObject({
        code: '23503',
        constraint: 'funds_kind_fkey',
      });
    });
    it('accept a kind added as a row', async () => {
      await db.admin`INSERT INTO public.fund_kinds (id, name) VALUES ('Event', 'Event')`;
      await asRole(db.admin, 'api_write', { workspace_id: ws.id }, (tx) =>
        fund(tx as unknown as Sql, { kind: 'Event' }),
      );
    });
    it('refuse an end date before the start date', async () => {
      expect(await failure((tx) => fund(tx, { start_date: '2026-05-10', end_date: '2026-05-09' }))).toMatchObject({
        code: '23514',
        constraint: 'funds_end_not_before_start',
      });
    });
    it('refuse a negative target and a currency that is not ISO 4217-shaped', async () => {
      expect(await failure((tx) => fund(tx, { target_amount: -1 }))).toMatchObject({
        code: '23514',
        constraint: 'funds_target_amount_not_negative',
      });
      expect(await failure((tx) => fund(tx, { currency: 'euro' }))).toMatchObject({
        code: '23514',
        constraint: 'funds_currency_iso4217',
      });
    });
    it('refuse an incomplete or impossible contribution schedule', async () => {
      expect(await failure((tx) => fund(tx, { contribution_amount: 20 }))).toMatchObject({
        code: '23514',
        constraint: 'funds_contribution_schedule_complete',
      });
      expect(
        await failure((tx) =>
          fund(tx, { contribution_amount: 20, contribution_frequency: 'weekly', contribution_due_day: 9 }),
        ),
      ).toMatchObject({ code: '23514', constraint: 'funds_contribution_weekday' });
      expect(
        await failure((tx) =>
          fund(tx, { contribution_amount: 20, contribution_frequency: 'daily', contribution_due_day: 1 }),
        ),
      ).toMatchObject({ code: '23514', constraint: 'funds_contribution_frequency_check' });
      expect(
        await failure((tx) => fund(tx, { contribution_amount: -20, contribution_frequency: 'once' })),
      ).toMatchObject({ code: '23514', constraint: 'funds_contribution_amount_positive' });
      await asRole(db.admin, 'api_write', { workspace_id: ws.id }, (tx) =>
        fund(tx as unknown as Sql, {
          contribution_amount: 20,
          contribution_frequency: 'monthly',
          contribution_due_day: 1,
        }),
      );
    });
    it('refuse a duplicate participant', async () => {
      expect(
        await failure(
          (tx) => tx`INSERT INTO public.fund_participants (fund_id, contact_id) VALUES (${ws.fundId}, ${ws.contactId})`,
        ),
      ).toMatchObject({ code: '23505' });
    });
    it('have a balance that is the sum of their transactions, never stored', async () => {
      const columns =
        await db.admin`SELECT column_name FROM information_schema.columns WHERE table_name = 'funds' AND column_name = 'balance'`;
      expect(columns).toHaveLength(0);
      const { balance } = first(
        await asRole(db.admin, 'api_write', { workspace_id: ws.id }, async (tx) => {
          await fundTx(tx as unknown as Sql, { amount: -30.25, category_id: 'hotel' });
          return tx`SELECT public.balance(f) AS balance FROM public.funds f WHERE id = ${ws.fundId}`;
        }),
      );
      expect(balance).toBe('69.75'); // 100 from the fixture - 30.25
    });
  });

  describe('contacts', () => {
    it('need a name and refuse a malformed email or phone', async () => {
      expect(await failure((tx) => tx`INSERT INTO public.contacts (name) VALUES (NULL)`)).toMatchObject({
        code: '23502',
        column: 'name',
      });
      expect(
        await failure((tx) => tx`INSERT INTO public.contacts (name, email) VALUES ('A', 'not-an-email')`),
      ).toMatchObject({ code: '23514', constraint: 'contacts_email_format' });
      expect(
        await failure((tx) => tx`INSERT INTO public.contacts (name, phone) VALUES ('A', 'call me')`),
      ).toMatchObject({ code: '23514', constraint: 'contacts_phone_format' });
    });
  });
});
