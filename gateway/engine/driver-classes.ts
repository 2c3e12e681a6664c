import type { Sql } from 'postgres';
import { compile, run, sql } from './sql.js';

// postgres.js declares `static get [Symbol.species]()` in the class bodies of its Query (a
// Promise) and its Result (an Array). V8 (Node 20) leaves a class constructor declared that
// way with its properties in dictionary mode, and then never finishes optimising a function
// that constructs one: TurboFan compiles it (Query's and Result's constructors, sql.unsafe, the
// connection's ReadyForQuery, the engine's run()), finds at the end that a map it relied on
// changed ("Bailed out due to dependency change"), and starts again, for as long as the
// process runs. Under a list read at 16 connections that was about 30 aborted compilations a
// second on V8's worker threads, and the driver's hot functions stayed in baseline code: the
// server spent 0.58 CPU ms per request, 0.36 once fixed, and answered 1,430 req/s, then 1,880.
//
// Declaring a subclass of a constructor makes V8 turn that constructor (now a prototype) into
// fast mode, which ends it. Nothing else about the classes changes: the subclasses made here
// are never used.

/** Declares a subclass of `constructor`, for its side effect in V8 (see above); again is harmless. */
function fastMode(constructor: unknown): void {
  void class extends (constructor as new (...args: never[]) => object) {};
}

const SELECT_1 = compile(sql`SELECT 1`);

/**
 * Puts postgres.js's Query and Result classes (shared by every client of the process) in fast
 * mode: Query's at once, from a query made and never sent, Result's from the answer of one
 * `SELECT 1` on `client`. Resolves when both are done; rejects if that statement fails.
 */
export async function keepDriverClassesFast(client: Sql): Promise<void> {
  fastMode(run(client, SELECT_1, false).constructor); // a query runs only once awaited: this one never is
  fastMode((await run(client, SELECT_1, false)).constructor);
}
