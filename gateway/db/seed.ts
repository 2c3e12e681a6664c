import type { TransactionSql } from 'postgres';
import { oneRow } from '../engine/invariant.js';

// The demo workspace's data, for a first `tally up`: realistic data to try every surface on.
// It is written through the API role under the workspace's claims, so RLS checks it like any
// client, in the caller's transaction (which made the workspace): a start interrupted
// half-way leaves nothing behind.

const DAY = 86_400_000;
const ago = (days: number, hour = 12): string => {
  const d = new Date(Date.now() - days * DAY);
  d.setUTCHours(hour, 0, 0, 0);
  return d.toISOString();
};

/** Fills the workspace `workspaceId`; the transaction's role is the API role afterwards. */
export async function seedDemo(tx: TransactionSql, workspaceId: string): Promise<void> {
  await tx`SELECT set_config('role', 'api_write', true), set_config('request.jwt.claims', ${JSON.stringify({ workspace_id: workspaceId, role: 'api_write' })}, true)`;

  const expenses: [string, number, string, string, number, string | null][] = [
    ['Rent', 1450, 'fixed-expenses', 'bank-transfer', 150, 'Monthly rent'],
    ['Grocery store', 82.4, 'essentials', 'credit-card', 140, null],
    ['Coffee with Ana', 7.5, 'food-drinks', 'mobile-wallet', 120, null],
    ['Metro card top-up', 40, 'local-transport', 'cash', 110, null],
    ['Running shoes', 119.99, 'sports', 'credit-card', 95, 'Spring sale'],
    ['Cinema tickets', 24, 'entertainment', 'credit-card', 80, null],
    ['Laptop installment 3/12', 99, 'installment-payment', 'installment', 60, null],
    ['Haircut', 35, 'beauty-care', 'cash', 45, null],
    ['Index fund', 300, 'investments', 'bank-transfer', 30, 'Monthly savings plan'],
    ['Team lunch', 64.3, 'work-expenses', 'credit-card', 21, 'To be reimbursed'],
    ['Winter jacket', 189, 'clothing', 'credit-card', 9, null],
    ['Dinner at Casa Azul', 58.2, 'food-drinks', 'credit-card', 2, null],
  ];
  for (const [name, amount, category, method, days, note] of expenses) {
    await tx`INSERT INTO public.personal_transactions (name, amount, category_id, method_id, occurred_at, note)
               VALUES (${name}, ${amount}, ${category}, ${method}, ${ago(days)}, ${note})`;
  }

  const people = [
    { name: 'Ana Souza', nickname: 'Ana', phone: '+351 912 345 678', email: 'ana@example.com' },
    { name: 'Ben Carter', nickname: 'Benny', phone: '+44 7700 900123', email: 'ben@example.com' },
    { name: 'Chloé Martin', nickname: null, phone: '+33 6 12 34 56 78', email: 'chloe@example.com' },
    { name: 'Dev Patel', nickname: 'Dev', phone: '+1 415 555 0134', email: null },
    { name: 'Emi Tanaka', nickname: 'Emi', phone: null, email: 'emi@example.com' },
  ];
  const contacts: string[] = [];
  for (const p of people) {
    const { id } = oneRow(
      await tx<{ id: string }[]>`
        INSERT INTO public.contacts (name, nickname, phone, email) VALUES (${p.name}, ${p.nickname}, ${p.phone}, ${p.email}) RETURNING id`,
      'the inserted contact',
    );
    contacts.push(id);
  }

  const { id: trip } = oneRow(
    await tx<{ id: string }[]>`
      INSERT INTO public.funds (name, kind, status, start_date, end_date, contribution_amount, contribution_frequency,
                                contribution_due_day, target_amount, description)
      VALUES ('Lisbon trip', 'Travel', 'In Progress', ${ago(-20).slice(0, 10)}, ${ago(-27).slice(0, 10)}, 150, 'monthly', 1,
              2400, 'Flights, flat and food for four') RETURNING id`,
    'the inserted fund',
  );
  const { id: badminton } = oneRow(
    await tx<{ id: string }[]>`
      INSERT INTO public.funds (name, kind, status, start_date, end_date, contribution_amount, contribution_frequency,
                                contribution_due_day, target_amount, description)
      VALUES ('Thursday badminton', 'Badminton', 'Upcoming', ${ago(-10).slice(0, 10)}, ${ago(-100).slice(0, 10)}, 20, 'weekly', 4,
              600, 'Court hire and shuttlecocks for the season') RETURNING id`,
    'the inserted fund',
  );

  for (const c of contacts.slice(0, 4))
    await tx`INSERT INTO public.fund_participants (fund_id, contact_id) VALUES (${trip}, ${c})`;
  for (const c of contacts.slice(1))
    await tx`INSERT INTO public.fund_participants (fund_id, contact_id) VALUES (${badminton}, ${c})`;

  const ledger: [string, string, number, string, string, number][] = [
    [trip, 'Contribution Ana', 300, 'fund-income', 'bank-transfer', 60],
    [trip, 'Contribution Ben', 300, 'fund-income', 'bank-transfer', 58],
    [trip, 'Contribution Chloé', 300, 'fund-income', 'mobile-wallet', 55],
    [trip, 'Contribution Dev', 300, 'fund-income', 'bank-transfer', 50],
    [trip, 'Flights LIS x4', -780, 'flight-tickets', 'credit-card', 40],
    [trip, 'Flat deposit', -250, 'hotel', 'bank-transfer', 25],
    [badminton, 'Season fee Ben', 60, 'fund-income', 'cash', 12],
    [badminton, 'Season fee Emi', 60, 'fund-income', 'mobile-wallet', 10],
    [badminton, 'Shuttlecocks', -32.5, 'other', 'cash', 5],
  ];
  for (const [fund, name, amount, category, method, days] of ledger) {
    await tx`INSERT INTO public.fund_transactions (fund_id, name, amount, category_id, method_id, occurred_at)
               VALUES (${fund}, ${name}, ${amount}, ${category}, ${method}, ${ago(days)})`;
  }
}
