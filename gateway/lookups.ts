import type { AuthContext, GatewayCall } from './engine/call.js';
import type { ChangeWatch } from './engine/changes.js';

// The live lookup lists (categories, payment methods, fund kinds): rows of their tables, read through the
// gateway like any client read, cached for every schema that publishes them (wrapper
// validation, OpenAPI, MCP tool schemas) until the database's change version moves: the tables
// are watched relations (sql/095), whose contents the version fingerprints.

export interface Lookups {
  expenseCategories: string[];
  fundCategories: string[];
  paymentMethods: string[];
  fundKinds: string[];
}

// The lists are not workspace data: any API role reads them. api_read is the least privilege;
// no claims at all (no workspace, so no tenant row), which the pre-request check knows as the
// server's own read rather than a JWT's.
const READER: AuthContext = { role: 'api_read', claims: {} };

export class LookupCache {
  private cached: Promise<Lookups> | undefined;
  /** The lists last read, and their JSON: a reload that finds them unchanged hands out this object again. */
  private last: { lookups: Lookups; json: string } | undefined;

  /** `onChange` is called after the lists may have changed (the cache is dropped by then). */
  constructor(
    private readonly call: GatewayCall,
    private readonly changes: ChangeWatch,
    onChange?: () => void,
  ) {
    changes.onChange(() => {
      this.invalidate();
      onChange?.();
    });
  }

  invalidate(): void {
    this.cached = undefined;
  }

  get(): Promise<Lookups> {
    if (this.cached) return this.cached;
    const value = this.changes.ready().then(() => this.load());
    this.cached = value;
    value.catch(() => {
      if (this.cached === value) this.invalidate(); // never cache a failure
    });
    return value;
  }

  private async read<T>(relation: string, select: string): Promise<T[]> {
    const res = await this.call(
      { method: 'GET', relation, query: new URLSearchParams({ select, order: 'id.asc' }), headers: {} },
      READER,
    );
    return JSON.parse(res.body ?? '[]') as T[];
  }

  private async load(): Promise<Lookups> {
    const [categories, methods, kinds] = await Promise.all([
      this.read<{ id: string; for_expenses: boolean; for_funds: boolean }>('categories', 'id,for_expenses,for_funds'),
      this.read<{ id: string }>('payment_methods', 'id'),
      this.read<{ id: string }>('fund_kinds', 'id'),
    ]);
    const lookups: Lookups = {
      expenseCategories: categories.filter((c) => c.for_expenses).map((c) => c.id),
      fundCategories: categories.filter((c) => c.for_funds).map((c) => c.id),
      paymentMethods: methods.map((m) => m.id),
      fundKinds: kinds.map((k) => k.id),
    };
    // What is built from the lists (the wrapper's validators, the MCP tool catalog) is cached
    // per Lookups object: the same object for the same lists, or every reload would rebuild it.
    const json = JSON.stringify(lookups);
    if (this.last?.json !== json) this.last = { lookups, json };
    return this.last.lookups;
  }
}
