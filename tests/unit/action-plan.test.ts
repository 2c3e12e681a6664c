// The action plan (plan/action.ts): what one gateway call will do, made by the function the
// gateway runs. The transaction each kind of request runs in, how it ends, what it checks before
// it ends and the Preference-Applied header are decided here, once, for every surface.

import type { ActionPlan } from '../../gateway/engine/plan/action.js';
import { compileRead, failure, plan } from './helpers/pipeline.js';

/** What a plan decides of its transaction and response, without its statements. */
const decided = (p: ActionPlan) => ({
  kind: p.kind,
  tx: p.tx,
  statements: p.statements.length,
  end: p.end,
  check: p.check,
  applied: 'applied' in p ? p.applied : undefined,
});

describe('the action plan', () => {
  it('reads READ ONLY, commits with its statements and echoes only the count it applied', () => {
    expect(decided(plan('posts', { headers: { Prefer: 'count=planned, tx=rollback, return=minimal' } }))).toEqual({
      kind: 'read',
      tx: { schema: 'blog', readOnly: true, write: false },
      statements: 2, // the read (with the response settings), the EXPLAIN its planned count reads
      end: 'commit',
      check: undefined,
      applied: 'count=planned',
    });
    expect(decided(plan('posts')).applied).toBeUndefined();
  });

  it('writes READ WRITE and ends as tx= says; a strict max-affected and the object media type check first', () => {
    const patch = plan('posts', {
      method: 'PATCH',
      query: 'id=gt.1',
      body: { title: 'x' },
      headers: { Prefer: 'handling=strict, max-affected=2, tx=rollback, return=representation' },
    });
    expect(decided(patch)).toEqual({
      kind: 'write',
      tx: { schema: 'blog', readOnly: false, write: true },
      statements: 2, // its statement, then the response settings (after its triggers)
      end: 'rollback',
      check: { column: 'total_result_set', maxAffected: 2, singular: false },
      applied: 'return=representation, tx=rollback, handling=strict, max-affected=2',
    });
    const single = plan('posts', {
      method: 'DELETE',
      query: 'id=eq.1',
      headers: { Accept: 'application/vnd.pgrst.object+json' },
    });
    expect([single.end, single.check]).toEqual([
      'commit',
      { column: 'total_result_set', maxAffected: undefined, singular: true },
    ]);
    // A POST's max-affected is not PostgREST's to apply: no check, nothing echoed of it.
    const post = plan('posts', {
      method: 'POST',
      body: { title: 'x' },
      headers: { Prefer: 'handling=strict, max-affected=1' },
    });
    expect([post.check, decided(post).applied]).toEqual([undefined, 'handling=strict']);
  });

  it('calls a VOLATILE function READ WRITE, a STABLE one READ ONLY, and echoes tx only where it applies', () => {
    const prefer = { Prefer: 'tx=rollback, handling=strict, max-affected=1' };
    const volatile = plan('rpc/new_post', { method: 'POST', body: { title: 'x' }, headers: prefer });
    expect(decided(volatile)).toEqual({
      kind: 'call',
      tx: { schema: 'blog', readOnly: false, write: true },
      statements: 2, // its statement, then the response settings (its transaction may write)
      end: 'rollback',
      check: { column: 'page_total', maxAffected: 1, singular: false },
      applied: 'tx=rollback, handling=strict, max-affected=1',
    });
    const stable = plan('rpc/post_count', { method: 'POST', headers: prefer });
    expect(decided(stable)).toEqual({
      kind: 'call',
      tx: { schema: 'blog', readOnly: true, write: false },
      statements: 1, // its statement (with the response settings)
      end: 'commit',
      check: undefined,
      applied: 'handling=strict, max-affected=1',
    });
  });

  it('explains the very statement the request would run, always rolled back', () => {
    const accept = { Accept: 'application/vnd.pgrst.plan+json' };
    const explained = plan('posts', { method: 'DELETE', query: 'id=eq.1', headers: accept });
    if (explained.kind !== 'explain') throw new Error('expected an explain plan');
    expect([explained.of.kind, explained.tx, explained.end]).toEqual([
      'write',
      { schema: 'blog', readOnly: false, write: true },
      'rollback',
    ]);
    expect(explained.statements[0]!.text).toBe(`EXPLAIN (FORMAT JSON) ${explained.of.statements[0]!.text}`);
    expect(explained.statements[0]!.params).toEqual(explained.of.statements[0]!.params);
  });

  it("describes the schema at the root, in a READ ONLY transaction of the caller's", () => {
    const root = plan('');
    if (root.kind !== 'inspect') throw new Error('expected an inspect plan');
    expect([root.tx, root.end, root.statements.length]).toEqual([
      { schema: 'blog', readOnly: true, write: false },
      'commit',
      2,
    ]);
    expect(root.relations.map((r) => r.name)).toEqual([...root.relations.map((r) => r.name)].sort());
    // The root takes reads only: a write to it is planned as a write to a relation named '' (404).
    expect(failure(() => plan('', { method: 'POST', body: {} }))).toMatchObject({ status: 404, code: 'PGRST205' });
  });

  it("bounds a read's body as the configuration says: the SQL the unit tier checks is the SQL that runs", () => {
    const free = compileRead('posts', { query: 'select=id' }).main;
    const bounded = compileRead('posts', { query: 'select=id', maxResponseBytes: 4096 }).main;
    expect(free.text).not.toMatch(/pgrst\.read_bytes/);
    // Each row's JSON is made once, in a subquery of its own (OFFSET 0), and both counted (its
    // bytes and the separator the body puts after it) and aggregated: what is counted is what is sent.
    expect(bounded.text).toContain(
      `FROM (SELECT pg_catalog.row_to_json("_postgrest_t")::text AS "pgrst_j" FROM pgrst_rows AS "_postgrest_t" OFFSET 0) AS "pgrst_body" WHERE CASE WHEN pg_catalog.set_config($1::text, (coalesce(nullif(pg_catalog.current_setting($1::text, true), ''), '0')::int8 + coalesce(pg_catalog.octet_length("pgrst_j") + 4, 0))::text, true)::int8 <= $2::text::int8`,
    );
    expect(bounded.text).toContain(`pg_catalog.string_agg("pgrst_j", E', \\n ')`);
    expect(bounded.params).toEqual(['pgrst.read_bytes_0', '4096']);
  });

  it('claims an Idempotency-Key first in the transaction of a POST that writes, with a digest of the request', () => {
    const store = { claim: 'keys.claim', save: 'keys.save' };
    const tenant = { column: 'tenant_id', claim: 'tenant' };
    const post = (key: string | undefined, body: unknown = { title: 'x' }, more: Record<string, unknown> = {}) =>
      plan('posts', {
        method: 'POST',
        body,
        headers: key === undefined ? {} : { 'Idempotency-Key': key },
        idempotency: store,
        tenant,
        ...more,
      });
    const keyed = post('retry-1');
    expect(keyed.idempotency?.key).toBe('retry-1');
    expect(keyed.idempotency?.claim.text).toMatch(/FROM "keys"\."claim"\(\$1::text, \$2::text\)$/);
    expect(keyed.idempotency?.claim.params).toEqual(['retry-1', keyed.idempotency?.fingerprint]);
    // The same request has the same digest; another body, another.
    expect(post('retry-2').idempotency?.fingerprint).toBe(keyed.idempotency?.fingerprint);
    expect(post('retry-1', { title: 'y' }).idempotency?.fingerprint).not.toBe(keyed.idempotency?.fingerprint);
    // Nothing to repeat: no key, no tenant, a transaction rolled back, an EXPLAIN.
    expect(post(undefined).idempotency).toBeUndefined();
    expect(post('k', { title: 'x' }, { tenant: undefined }).idempotency).toBeUndefined();
    expect(
      post('k', { title: 'x' }, { headers: { 'Idempotency-Key': 'k', Prefer: 'tx=rollback' } }).idempotency,
    ).toBeUndefined();
    // A key the deployment does not keep is not read; a bad one where it is, is a 400.
    expect(post('k', { title: 'x' }, { idempotency: undefined }).idempotency).toBeUndefined();
    for (const bad of ['', 'a b', 'k'.repeat(256), 'caf\u00e9'])
      expect(failure(() => post(bad))).toMatchObject({ status: 400, code: 'TLY020' });
  });
});
