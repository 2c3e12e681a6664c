import request from 'supertest';
import { addMember } from '../gateway/admin/members.js';
import type { TestDatabase } from './harness/db.js';
import type { TestApp } from './harness/app.js';
import type { WorkspaceFixture } from './harness/fixtures.js';
import { toolCaller } from './harness/mcp-tools.js';
import { csrfOf, present } from './harness/present.js';
import { restEnv, TEST_API_KEY } from './harness/rest.js';
import { setUpFinance, tearDown } from './harness/suite.js';

// The activity log names the token of a change (its id, its label, its scope), whichever surface
// it came through, from the claims the server signs; and the settings page shows a workspace's
// latest changes to its members, and nobody else's.

const PASSWORD = 'correct horse battery staple';

let db: TestDatabase, t: TestApp, a: WorkspaceFixture, b: WorkspaceFixture, tokenA: string;

beforeAll(async () => {
  ({ db, t, a, b, tokenA } = await setUpFinance(
    restEnv({ TALLY_SIGN_IN_FAILURES_PER_ACCOUNT: '100', TALLY_SIGN_IN_FAILURES_PER_ADDRESS: '1000' }),
    ['Named A', 'Named B'],
  ));
  await db.admin`UPDATE public.api_tokens SET label = 'Budget agent <v2>' WHERE workspace_id = ${a.id} AND scope = 'write'`;
  await addMember(db.admin, a.id, 'owner-a@example.com', 'owner', PASSWORD, 'test');
  await addMember(db.admin, b.id, 'owner-b@example.com', 'owner', PASSWORD, 'test');
});
afterAll(() => tearDown(db, t));

/** One MCP tools/call with workspace A's write token. */
const callTool = toolCaller(
  () => t.app,
  () => tokenA,
);

const expense = (name: string) => ({ name, amount: 9, category_id: 'other', method_id: 'cash' });

/** The token columns of the activity of the expense named `name`. */
const whoCreated = async (name: string) =>
  (
    await db.admin<{ actor: string; token_id: string; token_name: string; scope: string; surface: string }[]>`
      SELECT a.actor, a.token_id::text, a.token_name, a.scope, a.surface
        FROM public.activity a
        JOIN public.personal_transactions p ON p.workspace_id = a.workspace_id AND p.id::text = a.record_id
       WHERE p.name = ${name} AND a.action = 'insert'`
  )[0];

describe('the activity log names the token', () => {
  it('of a change through /rest/v1 and /api/v1 (the label signed into the access token) and MCP', async () => {
    const tokenId = present(
      (
        await db.admin<{ id: string }[]>`
        SELECT id::text FROM public.api_tokens WHERE workspace_id = ${a.id} AND scope = 'write'`
      )[0],
      "A's write token",
    ).id;
    const exchanged = await request(t.app).post('/api/v1/token').set('x-api-token', tokenA).expect(200);
    const jwt = exchanged.body.access_token as string;
    await request(t.app)
      .post('/rest/v1/personal_transactions')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` })
      .send(expense('Named via rest'))
      .expect(201);
    await request(t.app)
      .post('/api/v1/personal_transactions')
      .set({ Authorization: `Bearer ${jwt}` })
      .send(expense('Named via api'))
      .expect(201);
    await callTool('create_expense', expense('Named via mcp'));
    for (const [name, surface] of [
      ['Named via rest', 'rest'],
      ['Named via api', 'api'],
      ['Named via mcp', 'mcp'],
    ])
      expect(await whoCreated(name!)).toEqual({
        actor: 'token',
        token_id: tokenId,
        token_name: 'Budget agent <v2>',
        scope: 'write',
        surface,
      });
    // And through list_activity and GET /rest/v1/activity.
    const listed = await request(t.app)
      .get('/rest/v1/activity?select=token_name&token_name=not.is.null&limit=1')
      .set({ apikey: TEST_API_KEY, Authorization: `Bearer ${jwt}` })
      .expect(200);
    expect(listed.body).toEqual([{ token_name: 'Budget agent <v2>' }]);
  });

  it('SQL run in the database names none', async () => {
    await db.admin`INSERT INTO public.personal_transactions (workspace_id, name, amount, category_id, method_id)
                   VALUES (${a.id}, 'Named by SQL', 1, 'other', 'cash')`;
    expect(await whoCreated('Named by SQL')).toMatchObject({ actor: 'database', token_name: null, token_id: null });
  });
});

describe('the settings page', () => {
  async function pageOf(email: string, workspaceId: string, status = 200) {
    const agent = request.agent(t.app);
    const login = await agent.get('/settings/login').expect(200);
    await agent
      .post('/settings/login')
      .type('form')
      .send({ csrf: csrfOf(login.text), email, password: PASSWORD })
      .expect(303);
    return (await agent.get(`/settings/api?workspace=${workspaceId}`).expect(status)).text;
  }

  it("shows a member the workspace's latest changes, with the token's label, escaped", async () => {
    await callTool('create_expense', expense('Shown on the page'));
    const page = await pageOf('owner-a@example.com', a.id);
    const section = present(
      /<section aria-labelledby="activity-title">[\s\S]*?<\/section>/.exec(page)?.[0],
      'the section',
    );
    expect(section).toContain('Latest changes');
    expect(section).toContain('Budget agent &lt;v2&gt;');
    expect(section).toContain('personal_transactions');
    expect(section).toMatch(/<td>insert<\/td>/);
    expect(section).toContain('mcp');
  });

  it("shows nobody another workspace's changes", async () => {
    const page = await pageOf('owner-b@example.com', b.id);
    expect(page).not.toContain('Budget agent');
    // A's page, asked for by B's owner, is not found.
    const asked = await pageOf('owner-b@example.com', a.id, 404);
    expect(asked).not.toContain('Budget agent');
    const rows = await db.admin`SELECT * FROM tally.settings_activity(${Buffer.alloc(32)}, ${a.id}::uuid, 20)`;
    expect(rows).toEqual([]); // no session, no changes
  });
});
