import type { Sql } from 'postgres';
import { CHANGE_BOUND_MS } from '../../gateway/engine/changes.js';
import { waitFor } from './wait.js';

// What every Tally process on one database must see, and how soon (docs/deployment.md states the bound):
// a new category and payment method (the lookup lists the wrapper validates with and OpenAPI
// publishes), a new column and a new table (the schema cache). Shared by the suites of several
// processes on one Postgres, behind PgBouncer and on Citus.

/** Per change, per server: ms after the commit that its last probe missing the change started. */
export interface LiveChangeTimes {
  lookups: number[];
  column: number[];
  table: number[];
}

/**
 * For each base URL, how long after `change` committed a probe of it still missed the change:
 * when the last probe that answered `seen` false started, in ms (0 when the first one saw it).
 * A probe's start, not its end, because the server read its state somewhere in between: a
 * probe that started after the bound and still missed the change breaks the promise of docs/deployment.md,
 * while the end of the first one that saw it adds the answer's way back, which a loaded machine
 * stretches by seconds (the bound is on the server, not on the test's client).
 */
async function timesUntilSeen(
  bases: string[],
  change: () => Promise<unknown>,
  seen: (base: string) => Promise<boolean>,
  what: string,
): Promise<number[]> {
  for (const base of bases) expect(await seen(base)).toBe(false);
  await change();
  const committed = Date.now(); // after the commit was acknowledged: never earlier than it
  return Promise.all(
    bases.map(async (base) => {
      let lastMiss = 0;
      await waitFor(
        async () => {
          const probed = Date.now() - committed;
          if (await seen(base)) return true;
          lastMiss = probed;
          return false;
        },
        `${what} at ${base}`,
        30_000,
      );
      return lastMiss;
    }),
  );
}

/**
 * A probe's response, unless the rate limit refused it: a 429 is not "not seen yet" (it hid a
 * change for up to a minute), so the servers probed need a limit their probes stay under.
 */
async function answered(response: Promise<Response>): Promise<Response> {
  const res = await response;
  if (res.status === 429) throw new Error(`the rate limit refused a probe of ${res.url}: raise the servers' limit`);
  return res;
}

/**
 * Makes each change as the owner and measures when each process serves it. `headers` authorise
 * /rest/v1 reads (apikey and a JWT of an API role); `prefix` makes the names unique per run.
 */
export async function liveChangeTimes(
  admin: Sql,
  bases: string[],
  headers: Record<string, string>,
  prefix: string,
): Promise<LiveChangeTimes> {
  const category = `${prefix}-garden`;
  const method = `${prefix}-voucher`;
  const column = `${prefix.replace(/-/g, '_')}_receipt`;
  const table = `${prefix.replace(/-/g, '_')}_notes`;
  const published = async (base: string) => {
    const doc = await (await answered(fetch(`${base}/openapi.json`))).text();
    return doc.includes(`"${category}"`) && doc.includes(`"${method}"`);
  };
  const status = async (url: string) => (await answered(fetch(url, { headers }))).status;
  return {
    lookups: await timesUntilSeen(
      bases,
      () =>
        admin.begin(async (tx) => {
          await tx`INSERT INTO public.categories (id, name, for_expenses) VALUES (${category}, 'Garden', true)`;
          await tx`INSERT INTO public.payment_methods (id, name) VALUES (${method}, 'Voucher')`;
        }),
      published,
      'the new category and payment method',
    ),
    column: await timesUntilSeen(
      bases,
      () => admin.unsafe(`ALTER TABLE public.personal_transactions ADD COLUMN ${column} text`),
      async (base) => (await status(`${base}/rest/v1/personal_transactions?select=${column}&limit=1`)) === 200,
      'the new column',
    ),
    table: await timesUntilSeen(
      bases,
      () =>
        admin.begin(async (tx) => {
          await tx.unsafe(`CREATE TABLE public.${table} (id int PRIMARY KEY, body text)`);
          await tx.unsafe(`GRANT SELECT ON public.${table} TO api_read`);
        }),
      async (base) => (await status(`${base}/rest/v1/${table}?select=id`)) === 200,
      'the new table',
    ),
  };
}

/** No probe that started later than the bound docs/deployment.md states missed a change. */
export function expectWithinBound(times: LiveChangeTimes): void {
  const all = [...times.lookups, ...times.column, ...times.table];
  expect(Math.max(...all)).toBeLessThanOrEqual(CHANGE_BOUND_MS);
}
