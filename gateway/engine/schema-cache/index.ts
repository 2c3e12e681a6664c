// The live schema cache: loaded on first use, reloaded when the database's change version moves
// (changes.ts: every DDL command, GRANT and REVOKE included, and `NOTIFY pgrst, 'reload schema'`
// where LISTEN works), so a DBA's new table or column is served without a restart.

import type { Sql } from 'postgres';
import type { ChangeWatch } from '../changes.js';
import { loadSchemaCache } from './load.js';
import type { SchemaCache } from './types.js';
import { watched } from '../pool.js';
import { log } from '../log.js';

/** How long a request waits for the first load: as long as the server lets a connection attempt take. */
const LOAD_WAIT_MS = 5000;

export * from './types.js';

export class SchemaCacheHolder {
  private current: Promise<SchemaCache> | undefined;
  private loaded = false;
  /** The reload that runs, and the one that follows it for the calls made meanwhile (reload()). */
  private reloading: Promise<SchemaCache> | undefined;
  private nextReload: Promise<SchemaCache> | undefined;

  constructor(
    private readonly db: Sql,
    private readonly schemas: string[],
    private readonly tenantColumn: string | undefined,
    private readonly changes: ChangeWatch,
  ) {
    // The change is served once the reload is done (with no schema loaded, the first load is).
    changes.onChange(() => (this.current ? this.reload() : undefined));
  }

  get(): Promise<SchemaCache> {
    if (!this.current) {
      const loading = this.changes.ready().then(() => this.loadLogged());
      this.current = loading;
      this.loaded = false;
      loading.then(
        () => (this.loaded = true),
        () => {
          if (this.current === loading) this.current = undefined; // retried on the next request
        },
      );
    }
    // A request waits for a load in progress only so long: on a control connection that hangs
    // (a stopped backend, a network that drops packets) it would wait without end. The load
    // itself goes on, and the requests after it ends are served.
    return this.loaded ? this.current : watched(this.current, LOAD_WAIT_MS);
  }

  /**
   * Loads afresh; requests keep the old cache until the new one is complete. A reload asked for
   * while one runs gets the next load, which begins when that one ends and which every call
   * made meanwhile shares: it sees what changed before it was asked, and a burst of changes
   * costs two loads, not one per change queued behind each other on the control connection,
   * nor an endless queue behind a load that hangs.
   */
  reload(): Promise<SchemaCache> {
    if (!this.reloading) {
      return (this.reloading = this.load().finally(() => (this.reloading = undefined)));
    }
    this.nextReload ??= this.reloading
      .catch(() => {})
      .then(() => {
        this.nextReload = undefined;
        return this.reload();
      });
    return this.nextReload;
  }

  /** Whether a reload runs: a change was seen that the schema in use may not show yet. */
  isReloading(): boolean {
    return this.reloading !== undefined;
  }

  private async load(): Promise<SchemaCache> {
    const cache = await this.loadLogged();
    this.current = Promise.resolve(cache);
    this.loaded = true;
    return cache;
  }

  /** A load, and a line in the log for each relation or function it withholds (isolation.ts). */
  private async loadLogged(): Promise<SchemaCache> {
    const cache = await loadSchemaCache(this.db, this.schemas, this.tenantColumn);
    for (const [name, { kind, reason }] of cache.withheld ?? []) {
      log.warn({ [kind]: name, reason }, `not serving ${kind} ${name} until it is isolated by row-level security`);
    }
    return cache;
  }
}
