import { etagOf, matches, unchangedFilters } from '../../gateway/wrapper/etag.js';

// The wrapper's ETag (gateway/wrapper/etag.ts): a digest of the row, If-Match compared strongly,
// and the filters that make a conditional write miss a row changed after it was read.

describe('ETag and If-Match', () => {
  it('tags a row by its content, and compares If-Match lists strongly', () => {
    const tag = etagOf({ id: 'a', amount: 1 });
    expect(tag).toBe(etagOf({ id: 'a', amount: 1 }));
    expect(tag).not.toBe(etagOf({ id: 'a', amount: 2 }));
    expect(matches(tag, tag)).toBe(true);
    expect(matches(`"x", ${tag}`, tag)).toBe(true);
    expect(matches('*', tag)).toBe(true);
    expect(matches(`W/${tag}`, tag)).toBe(false);
    expect(matches('"x"', tag)).toBe(false);
  });

  it('filters a write on every scalar value read: null as is.null, JSON values and the excepted keys left out', () => {
    expect(
      unchangedFilters({ id: 'i', name: 'a,b (c)', amount: 12.5, note: null, ok: true, tags: ['x'] }, ['id']),
    ).toEqual([
      ['name', 'eq.a,b (c)'],
      ['amount', 'eq.12.5'],
      ['note', 'is.null'],
      ['ok', 'eq.true'],
    ]);
  });
});
