// A bounded map that forgets the least recently used entry first: every cache of the server
// has a size limit, so no client can grow the process's memory by varying its requests.
// A Map keeps insertion order; a hit is moved to the end, the first key is the oldest.

export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  /** The key at the end of the map's order (the latest set or hit), or undefined. */
  private newest: K | undefined;

  constructor(readonly limit: number) {}

  get(key: K): V | undefined {
    const value = this.map.get(key);
    // A hit on the newest key is where it is already: no delete and set again (the same
    // key is asked for again and again: a client's token, its read).
    if (value !== undefined && key !== this.newest) {
      this.map.delete(key);
      this.map.set(key, value);
      this.newest = key;
    }
    return value;
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    this.newest = key;
    if (this.map.size > this.limit) this.map.delete(this.map.keys().next().value as K);
  }

  delete(key: K): void {
    this.map.delete(key);
    if (key === this.newest) this.newest = undefined;
  }

  get size(): number {
    return this.map.size;
  }
}
