// How a server learns that what it caches from the database is stale: the schema (tables,
// columns, functions, grants) and the contents of a few small tables the database lists (an
// app's lookup lists). Every server polls one cheap statement, tally.change_version() of the
// gateway's own migrations, and tells its caches when the answer differs from the last one. A
// poll works wherever a statement does: through a transaction pooler, which loses LISTEN's
// notices, and on a Citus coordinator, where NOTIFY cannot run inside a distributed transaction.
// LISTEN pgrst stays as a faster path where it works (PostgREST's channel: `tally migrate` and
// a DBA's NOTIFY).
//
// After each change it sees, a server says on SERVED_CHANNEL that it serves the database as of
// the version it read, once every cache has done what the change asks (the schema cache's
// reload). `tally sql` and `tally migrate` wait for every running server to say so.
//
// The poll has a connection of its own (Pool.watch) and a deadline: on the control connection it
// queued behind schema loads, and a connection that stalled (a stopped backend, a pooler that
// hands out no server connection) held every later poll behind it, so changes went unseen for
// as long as that lasted. A poll past its deadline is given up with its connection.

import { randomUUID } from 'node:crypto';
import { isConnectionError, isPgError } from './errors/translate.js';
import { errorFields, log } from './log.js';
import { watched, type Pool } from './pool.js';
import { compile, param, run, sql, type CompiledSql } from './sql.js';

/**
 * How often each server asks (a statement of well under a millisecond). A change is seen by
 * every server within CHANGE_BOUND_MS: one interval, plus the poll and the reload it starts,
 * with room for a busy machine.
 */
const CHANGE_POLL_MS = 500;
export const CHANGE_BOUND_MS = 5000;

const VERSION = compile(sql`SELECT tally.change_version() AS version`);

/**
 * Where a server says that it serves the database as of a version: `<server> <version>`, the
 * version being the schema's part of the change version (its first word, which every schema
 * change moves).
 */
export const SERVED_CHANNEL = 'tally_schema_served';

/** The schema's part of a change version: its first word, a number. */
export function schemaVersionOf(changeVersion: string): number {
  return Number(changeVersion.split(' ')[0]);
}

/**
 * A poll that does not answer within this long is given up, with its connection; the next one
 * asks on a fresh one. Short enough that a stalled poll, the interval and a new connection stay
 * within CHANGE_BOUND_MS.
 */
const POLL_DEADLINE_MS = 1500;

/** What a cache does after a change: at once, or by the promise it returns (a reload). */
type ChangeListener = () => void | Promise<unknown>;

export class ChangeWatch {
  private readonly listeners = new Set<ChangeListener>();
  private version: string | undefined;
  private started: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private failing = false;
  /** This server, in what it tells on SERVED_CHANNEL. */
  private readonly server = randomUUID();

  constructor(
    private readonly db: Pick<Pool, 'control' | 'watch'>,
    private readonly intervalMs = CHANGE_POLL_MS,
  ) {}

  /**
   * Calls `listener` after each change seen, with the database at least as new as the change;
   * returns a function that stops that.
   */
  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Resolves once the version that the caches load against is known (or could not be read),
   * and starts watching: a cache reads the database only after it, so a change made while it
   * loads is seen by the next poll rather than taken for the state it loaded.
   */
  ready(): Promise<void> {
    return (this.started ??= this.start());
  }

  private async start(): Promise<void> {
    this.db.control
      .listen('pgrst', (payload) => {
        if (payload === '' || payload === 'reload schema') this.changed();
      })
      .catch((err: unknown) => log.debug(errorFields(err), 'no LISTEN for schema reloads; polling alone'));
    await this.poll();
    this.timer = setInterval(() => void this.poll(), this.intervalMs);
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const version = await this.read();
      if (this.failing) log.info('reading the database change version again');
      this.failing = false;
      if (this.version !== undefined && version !== this.version) this.changed(version);
      this.version = version;
    } catch (err) {
      if ((err as { code?: unknown }).code === 'CONNECTION_ENDED') return this.stop();
      if (!isPgError(err) || isConnectionError(err)) this.db.watch.renew();
      // Said once while it lasts; the version last read stays, and the first answer after
      // tells whether anything changed meanwhile.
      if (!this.failing) {
        log.warn(errorFields(err), 'cannot read the database change version; caches stay as they are');
        this.failing = true;
      }
    } finally {
      this.polling = false;
    }
  }

  /**
   * Tells the listeners (after the version now, when a NOTIFY rather than a poll brought the
   * news: what they load then is at least that version), and once all of them are done, says
   * on SERVED_CHANNEL that this server serves that version.
   */
  private changed(polled?: string): void {
    const version = polled !== undefined ? Promise.resolve(polled) : this.read();
    void version
      .then(async (seen) => {
        await Promise.all([...this.listeners].map((listener) => listener()));
        const payload = `${this.server} ${schemaVersionOf(seen)}`;
        await this.onWatch(compile(sql`SELECT pg_notify(${param(SERVED_CHANNEL)}, ${param(payload)})`));
      })
      .catch((err: unknown) => log.debug(errorFields(err), 'a change is served without saying so'));
  }

  /** The change version now, read on the watch's connection. */
  private async read(): Promise<string> {
    const [row] = await this.onWatch<{ version: string }[]>(VERSION);
    return row?.version ?? '';
  }

  /** A statement on the watch's connection, within the poll's deadline. */
  private onWatch<T extends object[]>(statement: CompiledSql): Promise<T> {
    return watched(run<T>(this.db.watch.sql, statement), POLL_DEADLINE_MS);
  }

  private stop(): void {
    clearInterval(this.timer);
  }
}
