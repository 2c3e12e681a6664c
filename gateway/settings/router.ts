import express, {
  type ErrorRequestHandler,
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
  type Router,
} from 'express';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdminError } from '../admin/workspaces.js';
import { addressKey } from '../auth/address.js';
import { parseScope } from '../admin/tokens.js';
import type { AppContext } from '../context.js';
import { ApiError, catalogue, toApiError } from '../errors.js';
import { formReader } from '../body.js';
import type { Pool } from '../engine/pool.js';
import { errorFields, log } from '../log.js';
import { packageRoot } from '../paths.js';
import type { Html } from './html.js';
import { checkPassword, hashPassword, passwordProblem } from '../admin/passwords.js';
import {
  clearSessionCookie,
  loginToken,
  newSecret,
  readCookie,
  sameSecret,
  secretHash,
  sessionSecret,
  setSessionCookie,
  validLoginToken,
} from './session.js';
import {
  changePassword,
  countSignInAttempt,
  createSession,
  createTokenAs,
  credentials,
  endSession,
  findSession,
  revokeTokenAs,
  setApiEnabledAs,
  tokensOf,
  activityOf,
  workspacesOf,
  type MemberWorkspace,
  type Session,
} from './store.js';
import {
  FLASH,
  apiPage,
  canManage,
  confirmRevokePage,
  confirmSwitchOffPage,
  loginPage,
  messagePage,
  noWorkspacePage,
  passwordPage,
  type ApiView,
} from './views.js';

// /settings: members sign in and manage their workspace's API access. A thin
// surface: it renders pages and calls the tally.settings_* functions (store.ts); the database
// decides who may do what, and the changes are the CLI's own functions.

/** Failed sign-ins are counted in windows of this length. */
export const SIGN_IN_WINDOW_SECONDS = 15 * 60;

// The same answer for an unknown email and a wrong password.
const SIGN_IN_REFUSED = 'The email or password is not correct.';

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const ONLY_ADMINS = 'Only an owner or an admin of the workspace can change its API access.';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const STATIC: Record<string, { type: string; body: Buffer }> = {
  'settings.css': {
    type: 'text/css; charset=utf-8',
    body: readFileSync(join(packageRoot, 'gateway/settings/static/settings.css')),
  },
  'settings.js': {
    type: 'text/javascript; charset=utf-8',
    body: readFileSync(join(packageRoot, 'gateway/settings/static/settings.js')),
  },
};

function send(res: Response, status: number, page: Html): void {
  res.status(status).type('html').send(page.value);
}

// The token just created, carried from the POST to the page after its redirect: an HttpOnly,
// SameSite=Strict cookie on /settings/api that lives a minute, is bound to the session by an
// HMAC keyed on the session's secret hash (another session, or a planted cookie, shows
// nothing), and is cleared by the page that shows it.
const CREATED_COOKIE = 'tally_created';
interface Created {
  token: string;
  scope: 'read' | 'write';
  label: string;
  workspace: string;
}
const createdMac = (s: Session, value: string): Buffer => createHmac('sha256', s.hash).update(value).digest();
const createdCookie = (req: Request) => ({
  path: '/settings/api',
  httpOnly: true,
  sameSite: 'strict' as const,
  secure: req.secure,
});

function giveCreated(req: Request, res: Response, s: Session, created: Created): void {
  const value = Buffer.from(JSON.stringify(created)).toString('base64url');
  res.cookie(CREATED_COOKIE, `${value}.${createdMac(s, value).toString('base64url')}`, {
    ...createdCookie(req),
    maxAge: 60_000,
  });
}

function takeCreated(
  req: Request,
  res: Response,
  s: Session,
  workspaceId: string | undefined,
): Omit<Created, 'workspace'> | undefined {
  const raw = readCookie(req, CREATED_COOKIE);
  if (raw === undefined) return undefined;
  res.clearCookie(CREATED_COOKIE, createdCookie(req));
  const [value, mac] = raw.split('.');
  if (!value || !mac) return undefined;
  const given = Buffer.from(mac, 'base64url');
  const expected = createdMac(s, value);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    const c = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as Created;
    if (
      c.workspace !== workspaceId ||
      !/^tally_ws_[0-9A-Za-z]{40}$/.test(c.token) ||
      (c.scope !== 'read' && c.scope !== 'write') ||
      typeof c.label !== 'string'
    )
      return undefined;
    return { token: c.token, scope: c.scope, label: c.label };
  } catch {
    return undefined;
  }
}

/** A form field as one string (a repeated or missing field is undefined). */
function field(req: Request, name: string): string | undefined {
  const body = req.body as Record<string, unknown> | undefined;
  const value = body?.[name];
  return typeof value === 'string' ? value : undefined;
}

const query = (req: Request, name: string): string | undefined => {
  const value = (req.query as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
};

/** Why a new password is refused, as a sentence, or undefined. */
function newPasswordProblem(current: string, chosen: string, repeat: string | undefined): string | undefined {
  if (chosen !== repeat) return 'The two new passwords differ.';
  if (chosen === current) return 'The new password must differ from the current one.';
  const problem = passwordProblem(chosen);
  return problem && `${problem.charAt(0).toUpperCase()}${problem.slice(1)}.`;
}

/**
 * The address sign-in failures count against: the client's, an IPv6 client's /56 network (as
 * every limit of an address counts it, auth/address.ts), so one client cannot make each guess
 * from an address of its own.
 */
const throttledAddress = (req: Request): string => addressKey(req.ip ?? req.socket.remoteAddress);
const originOf = (req: Request): string => `${req.protocol}://${req.get('host') ?? 'localhost'}`;
const session = (res: Response): Session | undefined => res.locals.session as Session | undefined;

/** A form's fields in req.body (body.ts, the one body reader): small forms, at most 20 fields. */
const readForm = formReader(16 * 1024, 20);
const formFields: RequestHandler = (req, res, next) => {
  readForm(req, res).then((fields) => {
    req.body = fields;
    next();
  }, next);
};

export function settingsRouter(ctx: AppContext): Router {
  const router = express.Router();
  router.use(securityHeaders);
  router.get('/static/:file', staticAsset);
  router.use(formFields);
  router.use(loadSession(ctx.db));
  router.use(passwordFirst);
  router.get('/', (_req, res) => res.redirect(303, '/settings/api'));
  signInRoutes(router, ctx);
  apiRoutes(router, ctx.db);
  router.use((_req, res) => {
    send(
      res,
      404,
      messagePage('Not found', 'There is no settings page at this address.', session(res), {
        href: '/settings/api',
        text: 'Back to API settings',
      }),
    );
  });
  router.use(pageErrors);
  return router;
}

// ---- Every page --------------------------------------------------------------------------

const securityHeaders: RequestHandler = (_req, res, next) => {
  res.set({
    'Content-Security-Policy': CSP,
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'same-origin',
    'Cache-Control': 'no-store', // pages show tokens and CSRF tokens
  });
  next();
};

const staticAsset: RequestHandler<{ file: string }> = (req, res, next) => {
  // Own keys only: `constructor` or `__proto__` would find Object.prototype's.
  const asset = Object.hasOwn(STATIC, req.params.file) ? STATIC[req.params.file] : undefined;
  if (!asset) return next();
  res.set('Cache-Control', 'public, max-age=3600').type(asset.type).send(asset.body);
};

/** The session, when the cookie names a live one. */
const loadSession =
  (db: Pool): RequestHandler =>
  async (req, res, next) => {
    const secret = sessionSecret(req);
    if (secret) res.locals.session = await findSession(db, secretHash(secret));
    next();
  };

/** A member with a one-time password chooses their own before anything else. */
const passwordFirst: RequestHandler = (req, res, next) => {
  const s = session(res);
  if (!s?.passwordTemporary || req.path === '/password' || req.path === '/logout') return next();
  if (req.method === 'GET' || req.method === 'HEAD') return res.redirect(303, '/settings/password');
  throw catalogue.notAllowed(
    'You signed in with a one-time password: choose your own password before changing anything.',
    'Choose your password first',
  );
};

/** Pages need a session: without one, off to the sign-in page. */
function pageSession(req: Request, res: Response): Session | undefined {
  const s = session(res);
  if (!s) {
    if (sessionSecret(req)) clearSessionCookie(req, res);
    res.redirect(303, '/settings/login');
  }
  return s;
}

/** Changes need a session and the session's CSRF token in the form. */
function changeSession(req: Request, res: Response): Session {
  const s = session(res);
  if (!s) throw catalogue.signedOut();
  if (!sameSecret(s.csrfToken, field(req, 'csrf'))) {
    throw catalogue.formRefused();
  }
  return s;
}

// ---- Sign-in, sign-out, password ---------------------------------------------------------

function signInRoutes(router: Router, ctx: AppContext): void {
  const limits: SignInLimits = {
    perAddress: ctx.config.signInFailuresPerAddress,
    perAccount: ctx.config.signInFailuresPerAccount,
    windowSeconds: SIGN_IN_WINDOW_SECONDS,
  };
  router.get('/login', loginForm);
  router.post('/login', signIn(ctx, limits));
  router.post('/logout', signOut(ctx.db));
  router.get('/password', passwordForm);
  router.post('/password', choosePassword(ctx.db, limits));
}

type SignInLimits = Parameters<typeof countSignInAttempt>[3];

/** The sentence of a 429 after too many failed attempts: when to try again. */
const tryAgainIn = (what: string, wait: number): string =>
  `Too many failed ${what}. Try again in ${Math.ceil(wait / 60)} minute${wait > 60 ? 's' : ''}.`;

const loginForm: RequestHandler = (req, res) => {
  if (session(res)) return res.redirect(303, '/settings/api');
  send(res, 200, loginPage({ token: loginToken(req, res) }));
};

/** Email and password in, a new session out: the form's token, then the failure limit, then the password. */
function signIn({ db, config }: AppContext, limits: SignInLimits): RequestHandler {
  return async (req, res) => {
    if (!validLoginToken(req, field(req, 'csrf'))) {
      return send(
        res,
        403,
        loginPage({ token: loginToken(req, res), error: 'The sign-in form had expired. Please try again.' }),
      );
    }
    const email = (field(req, 'email') ?? '').trim();
    const password = field(req, 'password') ?? '';
    const token = loginToken(req, res);
    if (!email || !password || email.length > 320) {
      return send(res, 400, loginPage({ token, email, error: 'Enter your email and your password.' }));
    }
    const address = throttledAddress(req);
    const wait = await countSignInAttempt(db, address, email, limits);
    if (wait > 0) {
      res.set('Retry-After', String(wait));
      return send(res, 429, loginPage({ token, email, error: tryAgainIn('sign-ins', wait) }));
    }
    const user = await credentials(db, email);
    if (!(await checkPassword(user?.password_hash, password)) || !user) {
      return send(res, 401, loginPage({ token, email, error: SIGN_IN_REFUSED }));
    }
    const previous = session(res);
    if (previous) await endSession(db, previous.hash); // one session per sign-in, never a reused one
    const secret = newSecret();
    const expiresAt = await createSession(
      db,
      user.user_id,
      secretHash(secret),
      newSecret(),
      config.settingsSessionHours * 3600,
      address,
    );
    setSessionCookie(req, res, secret, expiresAt);
    res.redirect(303, '/settings/api');
  };
}

function signOut(db: Pool): RequestHandler {
  return async (req, res) => {
    if (session(res)) {
      const s = changeSession(req, res);
      await endSession(db, s.hash);
    }
    clearSessionCookie(req, res);
    res.redirect(303, '/settings/login');
  };
}

const passwordForm: RequestHandler = (req, res) => {
  const s = pageSession(req, res);
  if (!s) return;
  send(res, 200, passwordPage({ session: s }));
};

/** A new password for the session's member: after the one-time password, or proving the current one. */
function choosePassword(db: Pool, limits: SignInLimits): RequestHandler {
  return async (req, res) => {
    const s = changeSession(req, res);
    // A session signed in with a one-time password proved it a moment ago: the form asks for
    // the new password only (the session can do nothing else until it is chosen).
    const temporary = s.passwordTemporary;
    const current = temporary ? '' : (field(req, 'current') ?? '');
    const chosen = field(req, 'new') ?? '';
    const problem = newPasswordProblem(current, chosen, field(req, 'repeat'));
    if (problem) return send(res, 400, passwordPage({ session: s, error: problem }));
    const address = throttledAddress(req);
    const user = await credentials(db, s.email);
    if (temporary) {
      if (!user || user.user_id !== s.userId) throw catalogue.notAllowed('Sign in again to choose your password.');
      if (await checkPassword(user.password_hash, chosen)) {
        return send(
          res,
          400,
          passwordPage({ session: s, error: 'The new password must differ from the one-time password.' }),
        );
      }
    } else {
      // The current password is a sign-in secret: guesses here count like failed sign-ins.
      const wait = await countSignInAttempt(db, address, s.email, limits);
      if (wait > 0) {
        res.set('Retry-After', String(wait));
        return send(res, 429, passwordPage({ session: s, error: tryAgainIn('attempts', wait) }));
      }
      if (!user || user.user_id !== s.userId || !(await checkPassword(user.password_hash, current))) {
        return send(res, 401, passwordPage({ session: s, error: 'Your current password is not correct.' }));
      }
    }
    await changePassword(db, s, await hashPassword(chosen), address);
    res.redirect(303, '/settings/api?done=password');
  };
}

// ---- A workspace's API access: tokens and the switch -------------------------------------

/** The session's workspaces and the one asked for (default: the first). */
async function workspaceOf(
  db: Pool,
  s: Session,
  id: string | undefined,
): Promise<{ workspaces: MemberWorkspace[]; current: MemberWorkspace | undefined }> {
  const workspaces = await workspacesOf(db, s);
  if (id === undefined || id === '') return { workspaces, current: workspaces[0] };
  const current = workspaces.find((ws) => ws.id === id);
  if (!current) throw catalogue.pageNotFound('No such workspace', 'You are not a member of that workspace.');
  return { workspaces, current };
}

/** A workspace the session's member may change, or a 403. */
async function managedWorkspace(db: Pool, s: Session, id: string | undefined): Promise<MemberWorkspace> {
  if (!id || !UUID.test(id)) throw catalogue.badForm('The form names no workspace.');
  const { current } = await workspaceOf(db, s, id);
  if (!current || !canManage(current)) {
    throw catalogue.notAllowed(ONLY_ADMINS);
  }
  return current;
}

async function renderApi(
  db: Pool,
  req: Request,
  res: Response,
  s: Session,
  status: number,
  extra: Partial<ApiView> & { workspaceId?: string },
): Promise<void> {
  const { workspaces, current } = await workspaceOf(db, s, extra.workspaceId);
  if (!current) return send(res, 200, noWorkspacePage(s));
  const [tokens, activity] = await Promise.all([
    tokensOf(db, s, current.id),
    activityOf(db, s, current.id, LATEST_CHANGES),
  ]);
  send(res, status, apiPage({ session: s, workspaces, current, tokens, activity, origin: originOf(req), ...extra }));
}

/** How many of a workspace's latest changes its page shows. */
const LATEST_CHANGES = 20;

/** An active token of the workspace, or a 404. */
async function activeToken(db: Pool, s: Session, ws: MemberWorkspace, id: string) {
  const token = UUID.test(id) ? (await tokensOf(db, s, ws.id)).find((t) => t.id === id) : undefined;
  if (!token || token.revoked_at)
    throw catalogue.pageNotFound('No such token', 'This workspace has no active token with that id.');
  return token;
}

/** A new token of the workspace, shown once on the page its redirect leads to. */
function mintToken(db: Pool): RequestHandler {
  return async (req, res) => {
    const s = changeSession(req, res);
    const ws = await managedWorkspace(db, s, field(req, 'workspace'));
    const label = (field(req, 'label') ?? '').trim();
    let scope;
    try {
      scope = parseScope(field(req, 'scope'));
      if (label.length > 200) throw new AdminError('A label has at most 200 characters.');
    } catch (err) {
      if (!(err instanceof AdminError)) throw err;
      return renderApi(db, req, res, s, 400, {
        workspaceId: ws.id,
        error: err.message.replace(/^./, (c) => c.toUpperCase()),
      });
    }
    let token;
    try {
      ({ token } = await createTokenAs(db, s, ws.id, scope, label));
    } catch (err) {
      // The workspace has its maximum of active tokens: said on the page, beside its tokens.
      if (!(err instanceof ApiError) || err.code !== 'TLY205') throw err;
      return renderApi(db, req, res, s, err.status, { workspaceId: ws.id, error: String(err.details) });
    }
    // POST/redirect/GET, so that a reload cannot post the form again and mint a second token.
    // The secret reaches the next page in a one-time cookie (never in a URL), shown once.
    giveCreated(req, res, s, { token, scope, label, workspace: ws.id });
    res.redirect(303, `/settings/api?workspace=${encodeURIComponent(ws.id)}`);
  };
}

function apiRoutes(router: Router, db: Pool): void {
  router.get('/api', async (req, res) => {
    const s = pageSession(req, res);
    if (!s) return;
    const done = query(req, 'done');
    const workspaceId = query(req, 'workspace');
    const created = takeCreated(req, res, s, workspaceId);
    await renderApi(db, req, res, s, 200, { workspaceId, flash: done ? FLASH[done] : undefined, created });
  });

  router.post('/api/tokens', mintToken(db));

  router.get('/api/tokens/:id/revoke', async (req, res) => {
    const s = pageSession(req, res);
    if (!s) return;
    const ws = await managedWorkspace(db, s, query(req, 'workspace'));
    send(res, 200, confirmRevokePage(s, ws, await activeToken(db, s, ws, req.params.id)));
  });

  router.post('/api/tokens/:id/revoke', async (req, res) => {
    const s = changeSession(req, res);
    const ws = await managedWorkspace(db, s, field(req, 'workspace'));
    const id = req.params.id;
    if (field(req, 'confirm') !== 'yes') {
      return res.redirect(
        303,
        `/settings/api/tokens/${encodeURIComponent(id)}/revoke?workspace=${encodeURIComponent(ws.id)}`,
      );
    }
    if (!UUID.test(id) || !(await revokeTokenAs(db, s, ws.id, id))) {
      throw catalogue.pageNotFound('No such token', 'This workspace has no active token with that id.');
    }
    res.redirect(303, `/settings/api?workspace=${encodeURIComponent(ws.id)}&done=revoked`);
  });

  router.get('/api/switch', async (req, res) => {
    const s = pageSession(req, res);
    if (!s) return;
    const ws = await managedWorkspace(db, s, query(req, 'workspace'));
    if (!ws.api_enabled) return res.redirect(303, `/settings/api?workspace=${encodeURIComponent(ws.id)}`);
    send(res, 200, confirmSwitchOffPage(s, ws));
  });

  router.post('/api/switch', async (req, res) => {
    const s = changeSession(req, res);
    const ws = await managedWorkspace(db, s, field(req, 'workspace'));
    const state = field(req, 'state');
    if (state !== 'on' && state !== 'off') throw catalogue.badForm('The API switch is either on or off.');
    if (state === 'off' && field(req, 'confirm') !== 'yes') {
      return res.redirect(303, `/settings/api/switch?workspace=${encodeURIComponent(ws.id)}`);
    }
    await setApiEnabledAs(db, s, ws.id, state === 'on');
    res.redirect(303, `/settings/api?workspace=${encodeURIComponent(ws.id)}&done=api-${state}`);
  });
}

/**
 * Errors of the settings pages are pages too, made from the same error as every surface's: the
 * message is the page's title, the details its text. The database's refusal of a role is a 403.
 */
const pageErrors: ErrorRequestHandler = (err, _req, res: Response, _next: NextFunction) => {
  if (res.headersSent) return;
  const refusedRole = (err as { code?: unknown } | null)?.code === '42501' && !(err instanceof ApiError);
  const { error, unexpected } = toApiError(refusedRole ? catalogue.notAllowed(ONLY_ADMINS) : err);
  if (unexpected) log.error(errorFields(err), 'unexpected error in /settings');
  send(
    res,
    error.status,
    messagePage(...pageText(error), session(res), { href: '/settings/api', text: 'Back to API settings' }),
  );
};

/** Title and text of an error's page: the settings' own errors say both, others by status. */
function pageText(error: ApiError): [string, string] {
  if (error.code.startsWith('TLY2') && typeof error.details === 'string') return [error.message, error.details];
  if (error.status === 413) return ['Form too large', 'The form sent more than a settings page ever sends.'];
  if (error.status >= 500)
    return ['Something went wrong', 'The change was not made. Please try again; the server log has the details.'];
  return [error.message, error.hint ?? ''];
}
