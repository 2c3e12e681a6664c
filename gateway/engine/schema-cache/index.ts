// The live schema cache: loaded on first use, reloaded on `NOTIFY pgrst, 'reload schema'`
// (PostgREST's channel and payload), so a DBA's new table or column is served without a restart.

import type { Sql } from 'postgres';
import { loadSchemaCache } from './load.js';
import type { SchemaCache } from './types.js';
import { errorFields, log } from '../log.js';

export * from './types.js';

export class SchemaCacheHolder {
  private current: Promise<SchemaCache> | undefined;
  private listening: Promise<unknown> | undefined;

  constructor(
    private readonly db: Sql,
    private readonly schemas: string[],
  ) {}

  get(): Promise<SchemaCache> {
    if (!this.listening) {
      this.listening = this.db
        .listen('pgrst', (payload) => {
          if (payload === '' || payload === 'reload schema') void this.reload().catch(() => {});
        })
        .catch((err) => {
          log.warn(errorFields(err), 'cannot LISTEN for schema reloads; a restart picks up schema changes');
        });
    }
    if (!this.current) {
      this.current = loadSchemaCache(this.db, this.schemas);
      this.current.catch(() => {
        this.current = undefined;
      }); // a failed load is retried on the next request
    }
    return this.current;
  }

  /** Loads afresh; requests keep the old cache until the new one is complete. */
  async reload(): Promise<SchemaCache> {
    const next = loadSchemaCache(this.db, this.schemas);
    const cache = await next;
    this.current = Promise.resolve(cache);
    return cache;
  }
}
