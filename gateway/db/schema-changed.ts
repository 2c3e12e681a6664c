import type postgres from 'postgres';
import { CHANGE_BOUND_MS, SERVED_CHANNEL, schemaVersionOf } from '../engine/changes.js';
import { WATCH_NAME } from '../engine/pool.js';

// After a schema change made outside a server (`tally sql`, `tally migrate`, `tally policies
// apply`): tell every server, and wait until each server running on the database serves it, so
// that the next request sees the change. Each server says which schema it serves after every
// reload (engine/changes.ts, SERVED_CHANNEL); the servers are counted by their change-watch
// sessions in pg_stat_activity. A server that cannot reload (its database connection hangs)
// leaves the wait at CHANGE_BOUND_MS, and the caller is told how many did not answer.

/** The running servers the change was for, and how many of them serve it. */
export interface Served {
  servers: number;
  serving: number;
}

/**
 * Tells every server that the schema changed: the change version they poll (which the event
 * trigger of sql/gateway/definitions/schema_version.sql moves by itself when the migrating role
 * could create it), and NOTIFY pgrst for the servers that listen; then waits for the running
 * servers to serve it. After the commit of what changed: a transaction that changed a
 * distributed table ends in a two-phase commit, which refuses one that has sent a NOTIFY.
 */
export async function schemaChanged(sql: postgres.Sql, boundMs = CHANGE_BOUND_MS): Promise<Served> {
  const [state] = await sql<{ moves: boolean; versioned: boolean }[]>`
    SELECT to_regprocedure('tally.schema_changed()') IS NOT NULL AS moves,
           to_regprocedure('tally.change_version()') IS NOT NULL AS versioned`;
  if (!state?.versioned) {
    await sql`NOTIFY pgrst, 'reload schema'`; // a database no Tally server polls
    return { servers: 0, serving: 0 };
  }
  // Listening before the change: a server may answer before this session reads the version.
  const said = new Map<string, number>();
  let heard = () => {};
  const listening = await sql.listen(SERVED_CHANNEL, (payload) => {
    const [server = '', version] = payload.split(' ');
    said.set(server, Math.max(said.get(server) ?? 0, Number(version)));
    heard();
  });
  try {
    // Its own transaction: the version moves, for every server, when it commits.
    if (state.moves) await sql`SELECT tally.schema_changed()`;
    await sql`NOTIFY pgrst, 'reload schema'`;
    const [now] = await sql<{ version: string; servers: number }[]>`
      SELECT tally.change_version() AS version,
             (SELECT count(*)::int FROM pg_stat_activity
               WHERE datname = current_database() AND application_name = ${WATCH_NAME}) AS servers`;
    const version = schemaVersionOf(now!.version);
    const servers = now!.servers;
    const serving = () => [...said.values()].filter((v) => v >= version).length;
    const deadline = Date.now() + boundMs;
    while (serving() < servers && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now());
        heard = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return { servers, serving: Math.min(serving(), servers) };
  } finally {
    await listening.unlisten();
  }
}
