import { accessToken, signJwt, startTestApp, type TestApp } from './app.js';
import { createTestDatabase, type TestDatabase } from './db.js';
import { tokenFor, workspaceWithData, type WorkspaceFixture } from './fixtures.js';
import { loadFixture, restEnv } from './rest.js';

// The arrangements the HTTP suites start from, written once. A suite calls one in its beforeAll,
// takes what it needs from the result, adds its own rows, and ends with tearDown in afterAll:
//
//   beforeAll(async () => {
//     ({ db, t, a, b, jwtA } = await setUpFinance(restEnv()));
//     await db.admin`INSERT …`;   // the suite's own data
//   });
//   afterAll(() => tearDown(db, t));

/** A finance database with two workspaces, tokens of both, and the app on it. */
export interface FinanceSuite {
  db: TestDatabase;
  t: TestApp;
  /** Workspaces A and B, one of everything in each (fixtures.ts). */
  a: WorkspaceFixture;
  b: WorkspaceFixture;
  /** Access tokens as the exchange mints them: of a write token of A, of B, and of a read token of A. */
  jwtA: string;
  jwtB: string;
  readA: string;
  /** The workspace token behind jwtA (what the exchange and MCP take). */
  tokenA: string;
}

/**
 * A database of its own (a clone of the migrated template), workspaces named `names`, a write
 * token of each and a read token of A with their JWTs, and the app started with `env` (give
 * restEnv(…) to serve /rest/v1).
 */
export async function setUpFinance(
  env: Record<string, string>,
  names: [string, string] = ['alpha', 'beta'],
): Promise<FinanceSuite> {
  const db = await createTestDatabase();
  const a = await workspaceWithData(db.admin, names[0]);
  const b = await workspaceWithData(db.admin, names[1]);
  const writeA = await tokenFor(db.admin, a.id, 'write');
  const writeB = await tokenFor(db.admin, b.id, 'write');
  const read = await tokenFor(db.admin, a.id, 'read');
  return {
    db,
    a,
    b,
    jwtA: await accessToken({ role: 'api_write', workspace_id: a.id, scope: 'write', sub: writeA.id }),
    jwtB: await accessToken({ role: 'api_write', workspace_id: b.id, scope: 'write', sub: writeB.id }),
    readA: await accessToken({ role: 'api_read', workspace_id: a.id, scope: 'read', sub: read.id }),
    tokenA: writeA.token,
    t: startTestApp(db.url, env),
  };
}

/** restEnv for the blog fixture schema: exposed alone, its own anonymous role, no pre-request check. */
export function blogEnv(env: Record<string, string> = {}): Record<string, string> {
  return restEnv({
    TALLY_DB_SCHEMAS: 'blog',
    TALLY_DB_ANON_ROLE: 'blog_anon',
    TALLY_DB_API_ROLES: 'blog_anon,blog_user',
    TALLY_DB_PRE_REQUEST: '',
    ...env,
  });
}

/** A database with the blog fixture schema, and the app serving it. */
export interface BlogSuite {
  db: TestDatabase;
  t: TestApp;
  /** A JWT of the blog's signed-in role, blog_user. */
  userJwt: string;
}

/**
 * A database of its own with the given files of tests/fixtures loaded in order (blog.sql first),
 * and the app started with blogEnv(env).
 */
export async function setUpBlog(
  fixtures: string[] = ['blog.sql'],
  env: Record<string, string> = {},
): Promise<BlogSuite> {
  const db = await createTestDatabase();
  for (const name of fixtures) await loadFixture(db.admin, name);
  return { db, t: startTestApp(db.url, blogEnv(env)), userJwt: await signJwt({ role: 'blog_user' }) };
}

/** Closes the apps, then drops the database. */
export async function tearDown(db: TestDatabase, ...apps: TestApp[]): Promise<void> {
  for (const app of apps) await app.close();
  await db.drop();
}
