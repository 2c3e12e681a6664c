import { randomBytes } from 'node:crypto';
import { createTestDatabase } from './harness/db.js';
import { fixtureText, runFixture } from './harness/rest.js';

// The fixtures of the /rest/v1 suites make roles and grant them to the server's login, and roles
// and their grants belong to the cluster, not to a database: files that start together load
// them at once, each into a database of its own. Each round here is such a start, with roles no
// file has made yet, as on a new cluster. (Before Postgres 16, a GRANT that waited for another
// transaction's same GRANT failed with a unique violation on pg_auth_members once that one
// committed; run with TEST_DATABASE_URL on such a server to see it.) The login they are granted
// to is a role of the round's own, not the server's: a tally serve that another file starts
// meanwhile refuses a login that is a member of roles other than its API roles.

const FIXTURES = [
  'blog.sql',
  'conformance.sql',
  'conformance-read.sql',
  'conformance-write.sql',
  'conformance-profiles.sql',
];
const ROUNDS = 3;

const roles: string[] = [];

afterAll(async () => {
  // Roles outlive the databases: drop them from a database of the cluster.
  const db = await createTestDatabase({ empty: true });
  for (const role of roles) await db.admin.unsafe(`DROP ROLE IF EXISTS ${role}`);
  await db.drop();
});

test.each(Array.from({ length: ROUNDS }, (_, i) => i + 1))(
  'files that load fixtures at once all load them, and the login is a member of their roles (round %i)',
  async () => {
    const suffix = randomBytes(4).toString('hex');
    const [anon, user, login] = [`fixture_anon_${suffix}`, `fixture_user_${suffix}`, `fixture_login_${suffix}`];
    roles.push(anon, user, login);
    const texts = await Promise.all(FIXTURES.map(fixtureText));
    const dbs = await Promise.all(FIXTURES.map(() => createTestDatabase({ empty: true })));
    await dbs[0]!.admin.unsafe(`CREATE ROLE ${login} NOLOGIN`);
    try {
      const loads = await Promise.allSettled(
        dbs.map((db, i) =>
          runFixture(
            db.admin,
            texts[i]!.replaceAll('blog_anon', anon)
              .replaceAll('blog_user', user)
              .replaceAll('TO authenticator', `TO ${login}`),
          ),
        ),
      );
      expect(loads.flatMap((l) => (l.status === 'rejected' ? [String(l.reason)] : []))).toEqual([]);
      const members = await dbs[0]!.admin<{ role: string }[]>`
        SELECT r.rolname AS role FROM pg_auth_members m
          JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles u ON u.oid = m.member
         WHERE u.rolname = ${login} AND r.rolname IN (${anon}, ${user})
         ORDER BY 1`;
      expect(members.map((m) => m.role)).toEqual([anon, user]);
    } finally {
      await Promise.all(dbs.map((db) => db.drop()));
    }
  },
);
