import type { Sql } from 'postgres';
import { revokeToken } from '../../gateway/admin/tokens.js';
import { setApiEnabled } from '../../gateway/admin/workspaces.js';
import { accessToken } from './app.js';
import { tokenFor } from './fixtures.js';
import { TEST_API_KEY } from './rest.js';

// The access checks that must hold however many Tally processes share a database, and whatever
// stands between them and Postgres (nothing, PgBouncer, a Citus coordinator): the rate limit is
// one count over all processes, and revocation and the API switch act on the very next request
// of every process on every surface. Shared by the suites of each of those set-ups.

/** Every surface a workspace token or its access token reaches, as a client calls it. */
export function surfaces(base: string) {
  const json = async (res: Response) => ({ status: res.status, body: (await res.json()) as Record<string, unknown> });
  return {
    exchange: async (token: string) =>
      json(await fetch(`${base}/api/v1/token`, { method: 'POST', headers: { authorization: `Bearer ${token}` } })),
    functions: async (token: string) =>
      json(
        await fetch(`${base}/functions/v1/api-token`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: '{}',
        }),
      ),
    rest: async (jwt: string) =>
      json(
        await fetch(`${base}/rest/v1/personal_transactions?select=id,name`, {
          headers: { apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` },
        }),
      ),
    wrapper: async (jwt: string) =>
      json(await fetch(`${base}/api/v1/personal_transactions`, { headers: { authorization: `Bearer ${jwt}` } })),
    mcp: async (token: string) =>
      json(
        await fetch(`${base}/mcp?token=${encodeURIComponent(token)}`, {
          method: 'POST',
          headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
        }),
      ),
  };
}

/** The status of each surface at each base, as `base surface status` lines (readable in a diff). */
async function statuses(bases: string[], token: string, jwt: string): Promise<string[]> {
  const lines: string[] = [];
  for (const base of bases) {
    const s = surfaces(base);
    lines.push(
      `${base} rest ${(await s.rest(jwt)).status}`,
      `${base} wrapper ${(await s.wrapper(jwt)).status}`,
      `${base} mcp ${(await s.mcp(token)).status}`,
      `${base} exchange ${(await s.exchange(token)).status}`,
      `${base} functions ${(await s.functions(token)).status}`,
    );
  }
  return lines;
}

const expected = (bases: string[], status: number) =>
  bases.flatMap((b) => ['rest', 'wrapper', 'mcp', 'exchange', 'functions'].map((s) => `${b} ${s} ${status}`));

/**
 * 90 requests of one token spread over the processes, three at a time (one each): exactly the
 * limit (60) succeed, the rest are 429 with Retry-After. The limit is the server's default.
 */
export async function rateLimitAcross(
  admin: Sql,
  bases: string[],
  workspaceId: string,
): Promise<{ ok: number; limited: number; retryAfter: number; other: string[] }> {
  const t = await tokenFor(admin, workspaceId, 'read');
  const jwt = await accessToken({ role: 'api_read', workspace_id: workspaceId, scope: 'read', sub: t.id });
  let ok = 0;
  let limited = 0;
  let retryAfter = 0;
  const other: string[] = [];
  for (let round = 0; round < 90 / bases.length; round++) {
    await Promise.all(
      bases.map(async (base) => {
        const res = await fetch(`${base}/rest/v1/personal_transactions?select=id`, {
          headers: { apikey: TEST_API_KEY, authorization: `Bearer ${jwt}` },
        });
        const body = (await res.json()) as { code?: string };
        if (res.status === 200) ok++;
        else if (res.status === 429 && body.code === 'PT429') {
          limited++;
          if (Number(res.headers.get('retry-after')) > 0) retryAfter++;
        } else other.push(`${res.status} ${JSON.stringify(body)}`);
      }),
    );
  }
  return { ok, limited, retryAfter, other };
}

/** Revoking a token: every surface of every process refuses it on the very next request. */
export async function revocationAcross(admin: Sql, bases: string[], workspaceId: string): Promise<void> {
  const t = await tokenFor(admin, workspaceId, 'write');
  const jwt = await accessToken({ role: 'api_write', workspace_id: workspaceId, scope: 'write', sub: t.id });
  expect(await statuses(bases, t.token, jwt)).toEqual(expected(bases, 200));
  await revokeToken(admin, t.id, workspaceId, 'test');
  expect(await statuses(bases, t.token, jwt)).toEqual(expected(bases, 401));
}

/** The API switch off: every surface of every process answers 403 on the very next request, and on again 200. */
export async function apiSwitchAcross(admin: Sql, bases: string[], workspaceId: string): Promise<void> {
  const t = await tokenFor(admin, workspaceId, 'write');
  const jwt = await accessToken({ role: 'api_write', workspace_id: workspaceId, scope: 'write', sub: t.id });
  expect(await statuses(bases, t.token, jwt)).toEqual(expected(bases, 200));
  await setApiEnabled(admin, workspaceId, false, 'test');
  try {
    expect(await statuses(bases, t.token, jwt)).toEqual(expected(bases, 403));
  } finally {
    await setApiEnabled(admin, workspaceId, true, 'test');
  }
  expect(await statuses(bases, t.token, jwt)).toEqual(expected(bases, 200));
}
