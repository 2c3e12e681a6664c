import { GATEWAY_OPTIONS } from '../gateway/deployment.js';
import { changesOf, createGateway } from '../gateway/engine/run.js';
import { LookupCache } from '../gateway/lookups.js';
import { createTestDatabase, type TestDatabase } from './harness/db.js';
import { startTestApp, type TestApp } from './harness/app.js';

// The lookup lists are reloaded when the database's change version moves. What is built from
// them (the wrapper's validators, the MCP tool catalog) is cached per Lookups object, so a
// reload that finds the same lists must hand out the same object, and a change a new one.

describe('the lookup cache', () => {
  let db: TestDatabase;
  let t: TestApp;
  let cache: LookupCache;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = startTestApp(db.url);
    cache = new LookupCache(createGateway(t.ctx, GATEWAY_OPTIONS), changesOf(t.ctx));
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('hands out the same object after a reload that finds the lists unchanged', async () => {
    const before = await cache.get();
    cache.invalidate();
    const after = await cache.get();
    expect(after).toEqual(before);
    expect(after).toBe(before);
  });

  it('hands out a new object with the new lists after a change', async () => {
    const before = await cache.get();
    await db.admin`INSERT INTO public.categories (id, name, for_expenses) VALUES ('garden', 'Garden', true)`;
    cache.invalidate();
    const after = await cache.get();
    expect(after).not.toBe(before);
    expect(after.expenseCategories).toContain('garden');
    expect(before.expenseCategories).not.toContain('garden');
  });
});
