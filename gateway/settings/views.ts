import type { Scope } from '../admin/tokens.js';
import { html, type Html, type HtmlValue } from './html.js';
import { MIN_PASSWORD_LENGTH } from '../admin/passwords.js';
import type { ActivityRow, MemberWorkspace, Session, TokenRow } from './store.js';

// The pages of /settings: plain server-rendered HTML, one stylesheet and one small script of
// our own (same origin, allowed by the Content-Security-Policy), no inline script or style.

export const canManage = (ws: MemberWorkspace): boolean => ws.role === 'owner' || ws.role === 'admin';

const SCOPE_NAMES: Record<Scope, string> = { read: 'Read-only', write: 'Read-write' };

const ROLE_NAMES: Record<MemberWorkspace['role'], string> = {
  owner: 'an owner',
  admin: 'an admin',
  member: 'a member',
};

export const FLASH: Record<string, string> = {
  revoked: 'The token is revoked. Clients that use it are refused from their next request on.',
  'api-on': 'API access is on.',
  'api-off': 'API access is off. Every token of this workspace is refused until it is switched on again.',
  password: 'Your password is changed. Your other sessions are signed out.',
};

function when(date: Date | null): Html | string {
  if (!date) return 'never';
  return html`<time datetime="${date.toISOString()}">${date.toISOString().slice(0, 16).replace('T', ' ')} UTC</time>`;
}

const apiUrl = (ws: MemberWorkspace, extra = ''): string =>
  `/settings/api?workspace=${encodeURIComponent(ws.id)}${extra}`;

const csrfField = (session: Session): Html => html`<input type="hidden" name="csrf" value="${session.csrfToken}">`;

interface LayoutOptions {
  title: string;
  session?: Session;
  body: HtmlValue;
}

function layout({ title, session, body }: LayoutOptions): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Tally</title>
<link rel="stylesheet" href="/settings/static/settings.css">
<script src="/settings/static/settings.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <span class="brand">Tally · workspace settings</span>
  ${
    session
      ? html`<span class="who">Signed in as <strong>${session.email}</strong></span>
  <a href="/settings/password">Change password</a>
  <form method="post" action="/settings/logout" class="inline">${csrfField(session)}<button type="submit" class="secondary">Sign out</button></form>`
      : ''
  }
</header>
<main id="main">
${body}
</main>
</body>
</html>
`;
}

export interface LoginView {
  token: string;
  email?: string;
  error?: string;
}

export function loginPage({ token, email, error }: LoginView): Html {
  return layout({
    title: 'Sign in',
    body: html`<h1>Sign in</h1>
<p>Sign in with the email and password your workspace owner gave you.</p>
${error ? html`<p class="error" role="alert" id="login-error">${error}</p>` : ''}
<form method="post" action="/settings/login" class="card stack">
  <input type="hidden" name="csrf" value="${token}">
  <label for="email">Email</label>
  <input id="email" name="email" type="email" autocomplete="username" required value="${email ?? ''}"${error ? html` aria-describedby="login-error"` : ''}>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>`,
  });
}

export interface ApiView {
  session: Session;
  workspaces: MemberWorkspace[];
  current: MemberWorkspace;
  tokens: TokenRow[];
  /** The workspace's latest changes, newest first. */
  activity: ActivityRow[];
  origin: string;
  flash?: string;
  error?: string;
  created?: { token: string; scope: Scope; label: string };
}

// One click opens a workspace: each is a link to its page. A member of one workspace sees no
// picker, its page is the one shown.
function workspacePicker(workspaces: MemberWorkspace[], current: MemberWorkspace): HtmlValue {
  if (workspaces.length < 2) return '';
  return html`<nav class="picker" aria-label="Workspaces">
  <span>Workspace:</span>
  <ul>
    ${workspaces.map((ws) => html`<li><a href="${apiUrl(ws)}"${ws.id === current.id ? html` aria-current="page"` : ''}>${ws.name}</a></li>`)}
  </ul>
</nav>`;
}

function createdPanel(created: NonNullable<ApiView['created']>, origin: string): Html {
  const curl = `curl -X POST ${origin}/api/v1/token -H "Authorization: Bearer ${created.token}"`;
  return html`<section class="card created" aria-labelledby="created-title">
  <h2 id="created-title">New ${SCOPE_NAMES[created.scope].toLowerCase()} token${created.label ? html` “${created.label}”` : ''}</h2>
  <p><strong>Copy it now: it is shown only this once.</strong> Tally keeps only a hash of it.</p>
  <label for="new-token">Token</label>
  <div class="copy-row">
    <input id="new-token" class="mono" type="text" readonly value="${created.token}">
    <button type="button" class="copy" data-copy="new-token" hidden>Copy token</button>
  </div>
  <p>MCP clients take it in the server URL: <code class="mono">${origin}/mcp?token=${created.token}</code></p>
  <p>Exchange it for a one-hour access token:</p>
  <div class="copy-row">
    <pre class="mono" id="curl-line">${curl}</pre>
    <button type="button" class="copy" data-copy="curl-line" hidden>Copy command</button>
  </div>
  <p class="copy-status" role="status" aria-live="polite"></p>
</section>`;
}

function switchSection(ws: MemberWorkspace, session: Session): Html {
  const state = ws.api_enabled
    ? html`<p class="state on">API access is <strong>on</strong>: the workspace's active tokens work.</p>`
    : html`<p class="state off">API access is <strong>off</strong>: every token of this workspace is refused.</p>`;
  let control: HtmlValue = '';
  if (canManage(ws)) {
    control = ws.api_enabled
      ? html`<form method="get" action="/settings/api/switch">
  <input type="hidden" name="workspace" value="${ws.id}">
  <button type="submit" class="danger">Turn API access off…</button>
</form>`
      : html`<form method="post" action="/settings/api/switch">
  ${csrfField(session)}<input type="hidden" name="workspace" value="${ws.id}"><input type="hidden" name="state" value="on">
  <button type="submit">Turn API access on</button>
</form>`;
  }
  return html`<section aria-labelledby="switch-title">
  <h2 id="switch-title">API switch</h2>
  ${state}
  ${control}
</section>`;
}

function createSection(ws: MemberWorkspace, session: Session): HtmlValue {
  if (!canManage(ws)) return '';
  return html`<section aria-labelledby="create-title">
  <h2 id="create-title">Create a token</h2>
  <form method="post" action="/settings/api/tokens" class="card stack">
    ${csrfField(session)}<input type="hidden" name="workspace" value="${ws.id}">
    <label for="label">Label <span class="hint">(what uses it, for example “laptop script”)</span></label>
    <input id="label" name="label" type="text" maxlength="200" autocomplete="off">
    <fieldset>
      <legend>Access</legend>
      <label class="choice"><input type="radio" name="scope" value="read" checked> Read-only</label>
      <label class="choice"><input type="radio" name="scope" value="write"> Read-write</label>
    </fieldset>
    <button type="submit">Create token</button>
  </form>
</section>`;
}

function tokensSection(ws: MemberWorkspace, tokens: TokenRow[]): Html {
  const manage = canManage(ws);
  const rows = tokens.map(
    (t) => html`<tr>
      <td>${t.label || html`<span class="hint">(no label)</span>`}</td>
      <td>${SCOPE_NAMES[t.scope]}</td>
      <td>${when(t.created_at)}</td>
      <td>${when(t.last_used_at)}</td>
      <td>${t.revoked_at ? html`<span class="badge revoked">Revoked</span> ${when(t.revoked_at)}` : html`<span class="badge active">Active</span>`}</td>
      ${manage ? html`<td>${t.revoked_at ? '' : html`<a class="button danger small" href="/settings/api/tokens/${encodeURIComponent(t.id)}/revoke?workspace=${encodeURIComponent(ws.id)}">Revoke…<span class="visually-hidden"> ${t.label || 'token without label'}</span></a>`}</td>` : ''}
    </tr>`,
  );
  return html`<section aria-labelledby="tokens-title">
  <h2 id="tokens-title">Tokens</h2>
  ${
    tokens.length === 0
      ? html`<p>This workspace has no tokens yet.</p>`
      : html`<table>
    <caption class="visually-hidden">Workspace tokens</caption>
    <thead><tr><th scope="col">Label</th><th scope="col">Access</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Status</th>${manage ? html`<th scope="col">Action</th>` : ''}</tr></thead>
    <tbody>
    ${rows}
    </tbody>
  </table>`
  }
</section>`;
}

/** Who made a change, in words: the token by its label and access, a member, or SQL in the database. */
function actorOf(a: ActivityRow): Html | string {
  if (a.actor === 'token')
    return html`${a.token_name || html`<span class="hint">(a token without label)</span>`}${a.scope === 'read' || a.scope === 'write' ? html` <span class="hint">${SCOPE_NAMES[a.scope]}</span>` : ''}`;
  if (a.actor === 'member') return a.member ?? 'a member';
  return 'SQL in the database';
}

/** The latest changes of the workspace's records (the activity log), newest first. */
function activitySection(activity: ActivityRow[]): Html {
  const rows = activity.map(
    (a) => html`<tr>
      <td>${when(a.at)}</td>
      <td>${a.undo_of ? `undo (${a.action})` : a.action}</td>
      <td>${a.table_name} <code class="mono">${a.record_id}</code></td>
      <td>${actorOf(a)}</td>
      <td>${a.surface}</td>
    </tr>`,
  );
  return html`<section aria-labelledby="activity-title">
  <h2 id="activity-title">Latest changes</h2>
  ${
    activity.length === 0
      ? html`<p>No changes of this workspace's records yet.</p>`
      : html`<table>
    <caption class="visually-hidden">The workspace's latest changes</caption>
    <thead><tr><th scope="col">When</th><th scope="col">Change</th><th scope="col">Record</th><th scope="col">By</th><th scope="col">Through</th></tr></thead>
    <tbody>
    ${rows}
    </tbody>
  </table>`
  }
</section>`;
}

/** Where a client connects with a token of this page: the API reference, MCP, the apikey. */
function connectSection(origin: string): Html {
  return html`<section aria-labelledby="connect-title">
  <h2 id="connect-title">Connect</h2>
  <dl>
    <dt>API reference</dt>
    <dd><a href="/api/v1/docs/">/api/v1/docs/</a> (OpenAPI: <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>)</dd>
    <dt>MCP server URL</dt>
    <dd><code class="mono">${origin}/mcp?token=</code> followed by a token; leave Client ID and Client Secret empty</dd>
    <dt>Publishable key</dt>
    <dd>the <code>apikey</code> header of <code>/rest/v1</code>: an operator makes one with <code>tally key create</code> (<code>npm start</code> prints the demo's)</dd>
  </dl>
</section>`;
}

export function apiPage(view: ApiView): Html {
  const { session, current } = view;
  return layout({
    title: `API · ${current.name}`,
    session,
    body: html`<h1>API access <span class="sub">${current.name}</span></h1>
${workspacePicker(view.workspaces, current)}
<p class="role">You are ${ROLE_NAMES[current.role]} of this workspace.${canManage(current) ? '' : ' You can see its tokens; an owner or an admin can change them.'}</p>
${view.flash ? html`<p class="notice" role="status">${view.flash}</p>` : ''}
${view.error ? html`<p class="error" role="alert">${view.error}</p>` : ''}
${view.created ? createdPanel(view.created, view.origin) : ''}
${switchSection(current, session)}
${createSection(current, session)}
${tokensSection(current, view.tokens)}
${activitySection(view.activity)}
${connectSection(view.origin)}`,
  });
}

export function confirmRevokePage(session: Session, ws: MemberWorkspace, token: TokenRow): Html {
  return layout({
    title: 'Revoke token',
    session,
    body: html`<h1>Revoke token${token.label ? html` “${token.label}”` : ''}?</h1>
<p>This ${SCOPE_NAMES[token.scope].toLowerCase()} token of <strong>${ws.name}</strong> was created ${when(token.created_at)} and last used ${when(token.last_used_at)}.
Once revoked, every client that uses it is refused from its next request on. This cannot be undone.</p>
<form method="post" action="/settings/api/tokens/${encodeURIComponent(token.id)}/revoke" class="actions">
  ${csrfField(session)}<input type="hidden" name="workspace" value="${ws.id}"><input type="hidden" name="confirm" value="yes">
  <button type="submit" class="danger">Revoke token</button>
  <a class="button secondary" href="${apiUrl(ws)}">Cancel</a>
</form>`,
  });
}

export function confirmSwitchOffPage(session: Session, ws: MemberWorkspace): Html {
  return layout({
    title: 'Turn API access off',
    session,
    body: html`<h1>Turn API access off for ${ws.name}?</h1>
<p>Every token of this workspace is refused at once, including access tokens already handed out, until an owner or an admin switches API access on again. The tokens themselves are kept.</p>
<form method="post" action="/settings/api/switch" class="actions">
  ${csrfField(session)}<input type="hidden" name="workspace" value="${ws.id}"><input type="hidden" name="state" value="off"><input type="hidden" name="confirm" value="yes">
  <button type="submit" class="danger">Turn API access off</button>
  <a class="button secondary" href="${apiUrl(ws)}">Cancel</a>
</form>`,
  });
}

export interface PasswordView {
  session: Session;
  error?: string;
}

export function passwordPage({ session, error }: PasswordView): Html {
  return layout({
    title: 'Change password',
    session,
    body: html`<h1>${session.passwordTemporary ? 'Choose your password' : 'Change password'}</h1>
${session.passwordTemporary ? html`<p class="notice" role="status">You signed in with a one-time password. Choose your own password to continue.</p>` : ''}
${error ? html`<p class="error" role="alert">${error}</p>` : ''}
<form method="post" action="/settings/password" class="card stack">
  ${csrfField(session)}
  ${
    session.passwordTemporary
      ? ''
      : html`<label for="current">Current password</label>
  <input id="current" name="current" type="password" autocomplete="current-password" required>`
  }
  <label for="new">New password <span class="hint">(at least ${MIN_PASSWORD_LENGTH} characters)</span></label>
  <input id="new" name="new" type="password" autocomplete="new-password" minlength="${MIN_PASSWORD_LENGTH}" required>
  <label for="repeat">New password again</label>
  <input id="repeat" name="repeat" type="password" autocomplete="new-password" minlength="${MIN_PASSWORD_LENGTH}" required>
  <button type="submit">Save password</button>
</form>`,
  });
}

export function noWorkspacePage(session: Session): Html {
  return layout({
    title: 'No workspace',
    session,
    body: html`<h1>No workspace</h1>
<p>You are not a member of any workspace yet. Ask a workspace owner, or the operator, to add you.</p>`,
  });
}

export function messagePage(
  title: string,
  message: string,
  session?: Session,
  link?: { href: string; text: string },
): Html {
  return layout({
    title,
    session,
    body: html`<h1>${title}</h1>
<p>${message}</p>
${link ? html`<p><a href="${link.href}">${link.text}</a></p>` : ''}`,
  });
}
