import request from 'supertest';
import { compiledReadsOf, schemaCacheOf } from '../gateway/engine/run.js';
import { ChangeWatch } from '../gateway/engine/changes.js';
import { SchemaCacheHolder } from '../gateway/engine/schema-cache/index.js';
import { Lru } from '../gateway/engine/lru.js';
import type { TestApp } from './harness/app.js';
import type { TestDatabase } from './harness/db.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpBlog, setUpFinance, tearDown } from './harness/suite.js';

// A table read is parsed, planned and compiled once per (relation, query string, role, headers)
// and schema cache: the compiled statement must never outlive the schema it was planned on,
// and never carry one caller's workspace to another (the workspace is a claim, not SQL).

describe('compiled reads', () => {
  it('the compiled-read cache is bounded and forgets the least recently used entry', () => {
    const lru = new Lru<string, number>(2);
    lru.set('a', 1);
    lru.set('b', 2);
    expect(lru.get('a')).toBe(1); // a is now the most recent
    lru.set('c', 3);
    expect([lru.get('a'), lru.get('b'), lru.get('c'), lru.size]).toEqual([1, undefined, 3, 2]);
  });

  describe('on the blog schema', () => {
    let db: TestDatabase, t: TestApp;
    beforeAll(async () => {
      ({ db, t } = await setUpBlog());
    });
    afterAll(() => tearDown(db, t));

    it('a read compiled before a schema reload is planned again on the new schema', async () => {
      const path = '/rest/v1/posts?select=id,author:users!posts_author_id_fkey(name)&order=site,id&limit=1';
      const first = await request(t.app).get(path).set('apikey', TEST_API_KEY).expect(200);
      expect(first.body).toEqual([{ id: 1, author: { name: 'Ada' } }]);
      await request(t.app).get(path).set('apikey', TEST_API_KEY).expect(200); // served compiled

      await db.admin.unsafe('ALTER TABLE blog.posts DROP CONSTRAINT posts_author_id_fkey');
      await schemaCacheOf(t.ctx).reload();
      // The relationship is gone from the schema cache: the embed is refused, not joined anyway.
      const after = await request(t.app).get(path).set('apikey', TEST_API_KEY);
      expect(after.status).toBe(400);
      expect(after.body.code).toBe('PGRST200');
    });

    it('schema reloads asked for while one runs are one load after it, shared by all of them', async () => {
      // A holder of its own, whose change watch is never started: no reload of the server's
      // (the DDL of the test before moved the change version) runs beside the burst.
      const holder = new SchemaCacheHolder(t.ctx.db.control, ['blog'], undefined, new ChangeWatch(t.ctx.db));
      // A burst of reloads, as the changes of a migration ask for them: twenty at once.
      const caches = await Promise.all(Array.from({ length: 20 }, () => holder.reload()));
      const [first, ...meanwhile] = caches;
      expect(new Set(meanwhile).size).toBe(1); // one load, not nineteen
      expect(meanwhile[0]).not.toBe(first); // begun after the first ended: it sees what changed meanwhile
      expect(await holder.get()).toBe(meanwhile[0]);

      // One asked for once everything settled starts a load of its own.
      await db.admin.unsafe('CREATE TABLE blog.after_the_burst (id int PRIMARY KEY)');
      const later = await holder.reload();
      expect(later).not.toBe(meanwhile[0]);
      expect(later.relations.has('blog.after_the_burst')).toBe(true);
    });
  });

  describe('on the finance schema', () => {
    let db: TestDatabase,
      t: TestApp,
      jwtA: string,
      jwtB: string,
      a: { id: string; expenseId: string },
      b: { id: string; expenseId: string };
    beforeAll(async () => {
      ({ db, t, jwtA, jwtB, a, b } = await setUpFinance(restEnv()));
    });
    afterAll(() => tearDown(db, t));

    it('the same read by two workspaces in turn answers each with its own rows only', async () => {
      const path = '/rest/v1/personal_transactions?select=id,workspace_id&order=occurred_at.desc&limit=20';
      for (let round = 0; round < 3; round++) {
        for (const [jwt, ws] of [
          [jwtA, a],
          [jwtB, b],
        ] as const) {
          const res = await request(t.app)
            .get(path)
            .set({ apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` })
            .expect(200);
          expect(res.body).toEqual([{ id: ws.expenseId, workspace_id: ws.id }]);
        }
      }
    });

    // A read's SQL grows with its select: 49 embeds of two levels in a URL of 1,900 characters
    // made 77,000 characters of SQL, and 1,000 of them kept compiled took the heap 221 MB higher.
    it('keeps a read compiled only up to COMPILED_READ_CHARS of key and SQL; a longer one is answered all the same', async () => {
      const kept = async () => compiledReadsOf(await schemaCacheOf(t.ctx).get()).size;
      const rest = { apikey: TEST_API_KEY, authorization: `Bearer ${jwtA}` };
      const short = await request(t.app).get('/rest/v1/funds?select=id,t:fund_transactions(id)').set(rest).expect(200);
      const before = await kept();
      const nested = Array.from({ length: 49 }, (_, k) => `f${k}:funds(id,t:fund_transactions(id))`).join(',');
      for (let i = 0; i < 3; i += 1) {
        const res = await request(t.app).get(`/rest/v1/fund_kinds?select=id,${nested}&limit=1`).set(rest).expect(200);
        expect(res.body[0].f48).toEqual(res.body[0].f0);
      }
      expect(await kept()).toBe(before);
      // The short read is still kept: asked again, it is a hit, not a new entry.
      await request(t.app).get('/rest/v1/funds?select=id,t:fund_transactions(id)').set(rest).expect(200, short.body);
      expect(await kept()).toBe(before);
    });
  });
});
