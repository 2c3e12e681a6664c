import { PostgrestClient } from '@supabase/postgrest-js';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listen } from '../gateway/server.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { accessToken, startTestApp, type TestApp } from './harness/app.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './harness/fixtures.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';

// postgrest-js (what supabase-js uses) drives the running gateway unmodified.

describe('postgrest-js against /rest/v1', () => {
  let db: TestDatabase;
  let t: TestApp;
  let server: Server;
  let a: WorkspaceFixture;
  let client: PostgrestClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await workspaceWithData(db.admin, 'alpha');
    await workspaceWithData(db.admin, 'beta');
    const tok = await tokenFor(db.admin, a.id, 'write');
    const jwt = await accessToken({ role: 'api_write', workspace_id: a.id, scope: 'write', sub: tok.id });
    t = startTestApp(db.url, restEnv());
    server = await listen(t.app, 0, '127.0.0.1');
    const { port } = server.address() as AddressInfo;
    client = new PostgrestClient(`http://127.0.0.1:${port}/rest/v1`, { headers: { apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` } });
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await t.close();
    await db.drop();
  });

  it('selects with embedding, filters, order, range and an exact count', async () => {
    await client.from('fund_transactions').insert([
      { fund_id: a.fundId, name: 'Hotel', amount: -300, category_id: 'hotel', method_id: 'credit-card' },
      { fund_id: a.fundId, name: 'Taxi', amount: -25, category_id: 'local-transport', method_id: 'cash' },
    ]).throwOnError();
    const { data, count, status } = await client.from('funds')
      .select('name, balance, fund_transactions(name, amount)', { count: 'exact' })
      .eq('id', a.fundId)
      .order('amount', { referencedTable: 'fund_transactions', ascending: true })
      .throwOnError();
    expect(status).toBe(200);
    expect(count).toBe(1);
    expect(data).toEqual([{ name: 'alpha fund', balance: -225, fund_transactions: [
      { name: 'Hotel', amount: -300 }, { name: 'Taxi', amount: -25 }, { name: 'Contribution', amount: 100 }] }]);

    const page = await client.from('fund_transactions').select('name', { count: 'exact' }).lt('amount', 0).order('name').range(1, 1).throwOnError();
    expect(page.data).toEqual([{ name: 'Taxi' }]);
    expect(page.count).toBe(2);
    expect(page.status).toBe(206);

    const filtered = await client.from('fund_transactions').select('name').in('name', ['Hotel', 'Contribution']).not('amount', 'gt', 0).throwOnError();
    expect(filtered.data).toEqual([{ name: 'Hotel' }]);
    const ored = await client.from('fund_transactions').select('name').or('amount.gt.50,name.ilike.tax*').order('name').throwOnError();
    expect(ored.data).toEqual([{ name: 'Contribution' }, { name: 'Taxi' }]);
    const head = await client.from('fund_transactions').select('*', { count: 'exact', head: true });
    expect([head.count, head.data]).toEqual([3, null]);
  });

  it('single() and maybeSingle()', async () => {
    const one = await client.from('funds').select('name').eq('id', a.fundId).single().throwOnError();
    expect(one.data).toEqual({ name: 'alpha fund' });
    const none = await client.from('funds').select('name').eq('name', 'nope').maybeSingle();
    expect(none.data).toBeNull();
    const many = await client.from('fund_transactions').select('name').single();
    expect(many.error?.code).toBe('PGRST116');
  });

  it('insert, upsert, update and delete with select() and single(), checked in the database', async () => {
    const ins = await client.from('contacts').insert({ name: 'Ana', phone: '+1 555 0200' }).select('id, name').single().throwOnError();
    expect(ins.status).toBe(201);
    const id = (ins.data as { id: string }).id;
    expect((await db.admin`SELECT workspace_id FROM public.contacts WHERE id = ${id}`)[0].workspace_id).toBe(a.id);

    const up = await client.from('contacts').upsert({ workspace_id: a.id, id, name: 'Ana B' }).select('name').throwOnError();
    expect(up.data).toEqual([{ name: 'Ana B' }]);

    const upd = await client.from('contacts').update({ nickname: 'AB' }, { count: 'exact' }).eq('id', id).select('name, nickname').throwOnError();
    expect(upd.data).toEqual([{ name: 'Ana B', nickname: 'AB' }]);
    expect(upd.count).toBe(1);
    expect((await db.admin`SELECT nickname FROM public.contacts WHERE id = ${id}`)[0].nickname).toBe('AB');

    const unfiltered = await client.from('contacts').delete();
    expect([unfiltered.status, unfiltered.error?.code]).toEqual([400, '21000']); // safe by default
    const del = await client.from('contacts').delete().eq('id', id);
    expect(del.status).toBe(204);
    expect((await db.admin`SELECT count(*)::int AS n FROM public.contacts WHERE id = ${id}`)[0].n).toBe(0);

    const bad = await client.from('personal_transactions').insert({ name: 'x', amount: -1, category_id: 'other', method_id: 'cash' });
    expect([bad.status, bad.error?.code]).toEqual([400, '23514']);
  });
});
