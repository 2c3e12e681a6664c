// A bounded map that forgets the least recently used entry first: every cache of the server
// has a size limit, so no client can grow the process's memory by varying its requests.
// A Map keeps insertion order; a hit is moved to the end, the first key is the oldest.

export class Lru<K, V> {
  private readonly map = new Map<K, V>();

  constructor(readonly limit: number) {}

  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.limit) this.map.delete(this.map.keys().next().value as K);
  }

  delete(key: K): void {
    this.map.delete(key);
  }

  get size(): number {
    return this.map.size;
  }
}
