import { Lru } from '../../gateway/engine/lru.js';

// The server's caches forget the least recently used entry first. A hit on the newest entry
// leaves the order as it is; any other hit makes its entry the newest.

const keys = (lru: Lru<string, number>, candidates: string[]) => candidates.filter((k) => lru.get(k) !== undefined);

test('forgets the least recently used entry first, a hit on the newest one or another alike', () => {
  const lru = new Lru<string, number>(3);
  lru.set('a', 1);
  lru.set('b', 2);
  lru.set('c', 3);
  expect(lru.get('c')).toBe(3); // the newest: stays the newest
  expect(lru.get('a')).toBe(1); // now the newest: b is the oldest
  lru.set('d', 4);
  expect(lru.size).toBe(3);
  expect(lru.get('b')).toBeUndefined();
  expect(lru.get('c')).toBe(3); // c, a, d → a, d, c
  lru.set('e', 5); // forgets a
  expect(keys(lru, ['a', 'b', 'c', 'd', 'e'])).toEqual(['c', 'd', 'e']);
});

test('a deleted newest entry is not taken for one', () => {
  const lru = new Lru<string, number>(2);
  lru.set('a', 1);
  lru.set('b', 2);
  lru.delete('b');
  lru.set('b', 3); // a, b
  expect(lru.get('a')).toBe(1); // b, a
  lru.set('c', 4); // forgets b
  expect(lru.get('b')).toBeUndefined();
  expect(lru.get('a')).toBe(1);
  expect(lru.size).toBe(2);
});
