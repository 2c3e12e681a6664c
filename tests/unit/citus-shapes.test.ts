import { claimsStatement } from '../../gateway/engine/execute.js';
import { compileRead, compileWrite } from './helpers/pipeline.js';

// The shapes of the engine's SQL that a sharded database (Citus) needs, each held by what it
// prevents rather than by a golden string, so that any SQL that keeps the shape passes and a
// change that loses it fails here, without a cluster. tests/scale/ runs them on Citus itself.

// post_id stands for a tenant column: comments and post_tags have it, posts and users do not.
const tenant = { column: 'post_id', claim: 'post' };

/** The parameter numbers a statement compares a column of an alias to: `"a"."col" = $n`. */
const comparedTo = (text: string, alias: string, column: string): number[] =>
  [...text.matchAll(new RegExp(`"${alias}"\\."${column}" = \\$(\\d+)::`, 'g'))].map((m) => Number(m[1]));

describe('the SQL shapes kept for Citus', () => {
  it('a one-row insert answered by its status alone is the INSERT alone, not inside a WITH: Citus plans an INSERT in a CTE in two parts, through the coordinator', () => {
    for (const prefer of [undefined, 'return=minimal']) {
      const headers: Record<string, string> = prefer ? { Prefer: prefer } : {};
      const { text } = compileWrite('tags', { method: 'POST', body: { id: 1, name: 'a' }, headers });
      expect([prefer, text.trimStart().slice(0, 7)]).toEqual([prefer, 'INSERT ']);
      expect(text).not.toMatch(/\bWITH\b/);
    }
  });

  it('a read, PATCH and DELETE of a tenant table compare its tenant column with the claim as a parameter: Citus routes the statement to the one shard of that value', () => {
    const read = compileRead('comments', { query: 'select=id,post_tags:posts(post_tags(tag_id))', tenant });
    const [root] = comparedTo(read.main.text, 'pgrst_0', 'post_id');
    expect(root).toBeDefined();
    // The parameter is the claim, filled at run time: never a value the client sent.
    expect(read.main.claims).toEqual([{ index: root! - 1, name: 'post' }]);
    // An embedded tenant table is held to the same value, so the join stays on the shard.
    expect(comparedTo(read.main.text, 'pgrst_2', 'post_id')).toEqual([root]);
    for (const method of ['PATCH', 'DELETE'] as const) {
      const write = compileWrite('comments', {
        method,
        query: 'id=eq.1',
        body: method === 'PATCH' ? { body: 'x' } : undefined,
        tenant,
      });
      expect([method, comparedTo(write.text, 'pgrst_0', 'post_id').length]).toEqual([method, 1]);
    }
  });

  it("a tenant read's planned or estimated count is exact: no EXPLAIN, whose statistics are every tenant's (and every shard's)", () => {
    for (const count of ['planned', 'estimated']) {
      const headers = { Prefer: `count=${count}` };
      expect(compileRead('comments', { headers, tenant }).explain).toBeUndefined();
      expect(compileRead('comments', { headers }).explain).toBeDefined();
    }
  });

  it("a computed field is called with a ROW(…) of the table's type, never the alias's whole row: on a shard that row is the shard table's, of another type", () => {
    const { text } = compileRead('posts', { query: 'select=id,title_upper' }).main;
    expect(text).toMatch(/"title_upper"\(ROW\([^)]*\)::"blog"\."posts"\)/);
    expect(text).not.toMatch(/"title_upper"\("pgrst_\d+"\)/);
  });

  it('the claims, as a statement of their own, are a SET LOCAL with the JSON quoted: Citus copies a SET LOCAL to every worker its transaction reaches (not a set_config())', () => {
    const json = JSON.stringify({ role: 'web_user', name: "O'Brien \\ Co" });
    const statement = claimsStatement(json);
    const quoted = /^SET LOCAL request\.jwt\.claims = E?'(.*)'$/s.exec(statement.text);
    expect(quoted).not.toBeNull();
    // The literal holds the JSON as it is: quotes doubled, backslashes escaped in an E'' string.
    expect(quoted![1]!.replace(/''/g, "'").replace(/\\\\/g, '\\')).toBe(json);
    expect(statement.params).toEqual([]);
  });
});
