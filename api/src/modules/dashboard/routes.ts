// The customer dashboard at / (issue 12, docs/adr/0050): server-rendered pages, form posts with a
// CSRF token, sessions in PostgreSQL. Every action calls the same operation as the admin API
// (common/src/accounts, admin/repo.ts updateAlerts, proxies/service.ts generateProxies) and, like
// the admin API, answers only once every API process has applied the change.
import express, { type Request, type Response, type Router } from 'express';
import helmet from 'helmet';
import { z } from 'zod';
import { AppError } from '#common/errors.ts';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { readProxyCredentials, resetProxyPassword } from '#common/accounts/accounts.ts';
import {
  createNamedKey,
  listKeys,
  MAX_NAMED_KEYS,
  regeneratePrimaryKey,
  revokeKey,
} from '#common/accounts/keys.ts';
import { getAutoRefill, putAutoRefill, autoRefillUpdateSchema } from '#common/billing/auto-refill.ts';
import { PRODUCTS } from '#common/products.ts';
import { activeKeyKind, updateAlerts, type AlertsRow } from '../admin/repo.ts';
import { createKeySchema } from '../admin/schemas.ts';
import { generateRequestSchema } from '../proxies/schemas.ts';
import { addAllowlistEntry, listAllowlist, removeAllowlistEntry } from '../ip-allowlist/repo.ts';
import type { AllowlistDeps } from '../ip-allowlist/routes.ts';
import { allowlistCreate } from '../ip-allowlist/schemas.ts';
import { generateProxies, ispProxies, type ProxiesDeps } from '../proxies/service.ts';
import { validationError } from '../../http/route.ts';
import {
  createSubUser,
  deleteSubUser,
  getSubUser,
  listSubUsers,
  subUserNames,
  updateSubUser,
} from '../sub-users/repo.ts';
import type { SubUsersDeps } from '../sub-users/routes.ts';
import { subUserCreate, subUserUpdate, type SubUser } from '../sub-users/schemas.ts';
import type { WaitForApiCaches } from '../sync/wait.ts';
import { productBalances, type UsageService } from '../usage/service.ts';
import { readTargets, readTargetStatsEnabled, setTargetStats } from '../targets/repo.ts';
import { dayProblem, utcToday } from '../targets/schemas.ts';
import { TARGET_RETENTION_DAYS } from '#common/target-stats.ts';
import { loadAssets } from './assets.ts';
import { listAutoRefill, listInvoices } from './billing.ts';
import type { Html } from './html.ts';
import { createPasswordLink, hashToken, origin } from './links.ts';
import * as pages from './pages.ts';
import {
  decoyHash,
  hashPassword,
  MAX_PASSWORD_LENGTH,
  passwordProblem,
  verifyPassword,
} from './passwords.ts';
import * as repo from './repo.ts';
import { csrfKeyFrom, SESSION_IDLE_SECONDS, Sessions } from './session.ts';

/** Sign-in failures allowed per email and per source address within the window. */
export const LOGIN_WINDOW_SECONDS = 15 * 60;
export const LOGIN_FAILURES_PER_EMAIL = 5;
export const LOGIN_FAILURES_PER_ADDRESS = 20;
const CHART_DAYS = 30;
const BODY_LIMIT = '16kb';

export interface DashboardDeps {
  pool: Pool;
  logger: Logger;
  credentialsKey: Buffer;
  usage: UsageService;
  proxies: ProxiesDeps;
  /** The IP allowlist's cap and range rules (docs/adr/0036), as the API applies them. */
  allowlist: AllowlistDeps;
  /** Sub-users' cap (docs/adr/0037), as the API applies it. */
  subUsers: SubUsersDeps;
  waitForApiCaches: WaitForApiCaches;
  /** Served over HTTPS (PROXYFLEET_DASHBOARD_HTTPS): Secure, __Host- cookies and HSTS. */
  https: boolean;
}

const DASHBOARD_PATH =
  /^\/(|sign-in|sign-out|forgot-password|set-password|proxies|proxies\/generate|proxies\/reset-password|proxies\/allowlist|proxies\/allowlist\/[^/]+\/remove|sub-users|sub-users\/[^/]+|sub-users\/[^/]+\/(?:status|reset-password|delete)|keys|keys\/regenerate|keys\/[^/]+\/revoke|alerts|target-stats|billing|billing\/auto-refill\/[^/]+|assets\/[^/]+)$/;
const SIGNED_OUT_PATHS = new Set(['/sign-in', '/forgot-password', '/set-password']);

const formString = (max: number) => z.string().max(max).optional().default('');
const signInForm = z.object({ email: formString(254), password: formString(MAX_PASSWORD_LENGTH) });
const alertsForm = z.object({
  lowBandwidth: z.literal('on').optional(),
  newInvoice: z.literal('on').optional(),
  serverAlerts: z.literal('on').optional(),
  lowBandwidthPercent: z.coerce.number().int().min(1).max(99),
});
const uuid = z.uuid();
/** The Billing page's auto-refill form: strings from the browser, judged by the API's own schema. */
const autoRefillForm = z.object({
  enabled: z.literal('on').optional(),
  thresholdGb: formString(32),
  refillGb: formString(32),
  maxRefillsPerMonth: formString(32),
});
const product = z.enum(PRODUCTS);
// A Map, not an object: `?done=constructor` must find nothing.
const PROXIES_NOTICES: ReadonlyMap<string, string> = new Map([
  ['password', 'A new proxy password is in place.'],
  ['allowlist-added', 'The address is allowlisted; gateways accept it within a second.'],
  ['allowlist-removed', 'The entry is removed; connections it admitted are ended.'],
]);

export function dashboardRouter(deps: DashboardDeps): Router {
  const { pool } = deps;
  const assets = loadAssets();
  const sessions = new Sessions({ pool, https: deps.https, csrfKey: csrfKeyFrom(deps.credentialsKey) });
  const router = express.Router();

  // Only the dashboard's own paths go through its headers, body parser, session and CSRF check;
  // anything else (an unknown /api/v1 path, say) leaves for the API's JSON 404/405.
  router.use((req, _res, next) => (DASHBOARD_PATH.test(req.path) ? next() : next('router')));
  router.use(assets.handler);
  router.use(
    helmet({
      contentSecurityPolicy: {
        useDefaults: false,
        directives: {
          defaultSrc: ["'none'"],
          scriptSrc: ["'self'"],
          styleSrc: ["'self'"],
          imgSrc: ["'self'", 'data:'],
          connectSrc: ["'self'"],
          fontSrc: ["'self'"],
          formAction: ["'self'"],
          frameAncestors: ["'none'"],
          baseUri: ["'none'"],
          objectSrc: ["'none'"],
        },
      },
      strictTransportSecurity: deps.https ? { maxAge: 31_536_000, includeSubDomains: true } : false,
      referrerPolicy: { policy: 'no-referrer' },
      crossOriginEmbedderPolicy: false,
    }),
  );
  router.use(express.urlencoded({ extended: false, limit: BODY_LIMIT, parameterLimit: 50 }));

  const base = (csrf: string, extra: Partial<pages.PageContext> = {}): pages.PageContext => ({
    assets,
    csrf,
    ...extra,
  });
  const send = (res: Response, page: Html, status = 200) => {
    res.status(status).type('html').set('Cache-Control', 'no-store').send(page.text);
  };

  /** Signed-out pages: their forms are bound to the pre-session cookie. */
  const anon = (req: Request, res: Response) => base(sessions.csrfToken(sessions.preSession(req, res)));

  // Every POST carries a CSRF token: bound to the session when signed in, to the pre-session cookie before.
  interface Signed {
    person: repo.Person;
    ctx: pages.PageContext;
  }
  const signedIn = new WeakMap<Request, Signed>();
  router.use(async (req, res, next) => {
    try {
      const current = await sessions.current(req);
      if (current) {
        signedIn.set(req, {
          person: current.person,
          ctx: base(sessions.csrfToken(current.token), { email: current.person.email, current: req.path }),
        });
      }
      if (
        req.method === 'POST' &&
        !sessions.csrfValid(req, current !== undefined && !SIGNED_OUT_PATHS.has(req.path))
      ) {
        return send(res, pages.forbiddenPage(current ? signedIn.get(req)!.ctx : anon(req, res)), 403);
      }
      next();
    } catch (err) {
      next(err);
    }
  });

  type Handler = (req: Request, res: Response, who: Signed) => Promise<void>;
  /** A page or action for signed-in people; others get the sign-in page. */
  const auth =
    (handler: Handler) =>
    async (req: Request, res: Response): Promise<void> => {
      const who = signedIn.get(req);
      if (!who) {
        if (req.method === 'GET' && req.path === '/') return send(res, pages.signInPage(anon(req, res)));
        return void res.redirect(303, '/sign-in');
      }
      await handler(req, res, who);
    };

  // --- signed out: sign in, forgot password, set password ---

  router.get('/sign-in', (req, res) => {
    if (signedIn.has(req)) return void res.redirect(303, '/');
    const notice = req.query.done === 'password' ? 'Your password is set. Sign in with it.' : undefined;
    send(res, pages.signInPage(anon(req, res), { notice }));
  });

  router.post('/sign-in', async (req, res) => {
    const form = signInForm.safeParse(req.body);
    const email = form.success ? form.data.email.trim() : '';
    const password = form.success ? form.data.password : '';
    const buckets = [`email:${email.toLowerCase()}`, `ip:${req.ip ?? 'unknown'}`];
    const counts = await repo.countFailures(pool, buckets, LOGIN_WINDOW_SECONDS);
    if (
      (counts.get(buckets[0]!) ?? 0) >= LOGIN_FAILURES_PER_EMAIL ||
      (counts.get(buckets[1]!) ?? 0) >= LOGIN_FAILURES_PER_ADDRESS
    ) {
      const minutes = LOGIN_WINDOW_SECONDS / 60;
      return send(
        res,
        pages.signInPage(anon(req, res), {
          email,
          error: `Too many failed sign-in attempts. Try again in ${minutes} minutes.`,
        }),
        429,
      );
    }
    const row = email ? await repo.findByEmail(pool, email) : undefined;
    // Unknown emails and accounts without a password still cost one scrypt: timing tells nothing.
    const ok = await verifyPassword(password, row?.passwordHash ?? (await decoyHash()));
    if (!row?.passwordHash || !ok) {
      await repo.recordFailure(pool, buckets, LOGIN_WINDOW_SECONDS);
      return send(
        res,
        pages.signInPage(anon(req, res), { email, error: 'The email or password is not right.' }),
        401,
      );
    }
    if (row.status !== 'active') {
      return send(
        res,
        pages.signInPage(anon(req, res), { email, error: 'This account is suspended. Contact support.' }),
        403,
      );
    }
    await repo.clearFailures(pool, buckets[0]!);
    // Housekeeping without a job: sign-ins are rare, and the expiry index makes this cheap.
    await repo.deleteExpiredSessions(pool, SESSION_IDLE_SECONDS);
    await sessions.start(res, row.accountId);
    res.redirect(303, '/');
  });

  router.get('/forgot-password', (req, res) => send(res, pages.forgotPage(anon(req, res))));

  router.post('/forgot-password', async (req, res) => {
    const email = signInForm.safeParse(req.body).data?.email.trim() ?? '';
    const ipBucket = `ip:${req.ip ?? 'unknown'}`;
    const counts = await repo.countFailures(pool, [ipBucket], LOGIN_WINDOW_SECONDS);
    if ((counts.get(ipBucket) ?? 0) >= LOGIN_FAILURES_PER_ADDRESS) {
      return send(
        res,
        pages.forgotPage(anon(req, res), { error: 'Too many requests. Try again later.' }),
        429,
      );
    }
    // Each request counts against the address, so the form cannot be used to flood a mailbox.
    await repo.recordFailure(pool, [ipBucket], LOGIN_WINDOW_SECONDS);
    const row = email ? await repo.findByEmail(pool, email) : undefined;
    if (row && row.status === 'active') await createPasswordLink(pool, row.accountId, 'reset', origin(req));
    // The same answer whether or not the email exists.
    send(res, pages.forgotPage(anon(req, res), { sent: true }));
  });

  router.get('/set-password', async (req, res) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    const person = token ? await repo.peekToken(pool, hashToken(token)) : undefined;
    if (!person) return send(res, pages.linkInvalidPage(anon(req, res)), 410);
    send(res, pages.setPasswordPage(anon(req, res), { token, email: person.email }));
  });

  router.post('/set-password', async (req, res) => {
    const body = req.body as Record<string, unknown>;
    const token = typeof body.token === 'string' ? body.token : '';
    const password = typeof body.password === 'string' ? body.password : '';
    const person = token ? await repo.peekToken(pool, hashToken(token)) : undefined;
    if (!person) return send(res, pages.linkInvalidPage(anon(req, res)), 410);
    const problem = passwordProblem(password, [person.email, ...person.email.split(/[@.+_-]/)]);
    if (problem)
      return send(
        res,
        pages.setPasswordPage(anon(req, res), { token, email: person.email, error: problem }),
        422,
      );
    const accountId = await repo.setPasswordWithToken(pool, hashToken(token), await hashPassword(password));
    if (!accountId) return send(res, pages.linkInvalidPage(anon(req, res)), 410);
    deps.logger.info({ accountId }, 'dashboard password set');
    res.redirect(303, '/sign-in?done=password');
  });

  router.post('/sign-out', async (req, res) => {
    await sessions.end(req, res);
    res.redirect(303, '/sign-in');
  });

  // --- Overview ---

  router.get(
    '/',
    auth(async (req, res, { person, ctx }) => {
      const snapshot = await deps.usage.snapshot(person.accountId);
      const balances = productBalances(snapshot.row);
      const caps = await repo.throttles(pool, person.accountId);
      const products = PRODUCTS.map((product) => ({ product, ...balances[product], cap: caps.get(product) }));
      const daily = await repo.dailyUsage(pool, person.accountId, CHART_DAYS);
      // Top targets: ?day=YYYY-MM-DD (the form's date field), today by default; a bad day is said
      // next to the field and today is shown.
      const asked = typeof req.query.day === 'string' && req.query.day !== '' ? req.query.day : undefined;
      const problem = asked === undefined ? undefined : dayProblem(asked);
      const date = asked !== undefined && !problem ? asked : utcToday();
      // ?subUser=<id>: only that sub-user's traffic (docs/adr/0037); one that is gone shows the account's.
      const subUsers = await subUserNames(pool, person.accountId);
      const subUser = subUsers.find((x) => x.id === req.query.subUser)?.id;
      const view = await readTargets(pool, person.accountId, date, undefined, subUser);
      if (!view) throw new AppError('ACCOUNT_NOT_FOUND');
      send(
        res,
        pages.overviewPage(ctx, {
          products,
          chart: chartData(daily, products),
          updatedAt: snapshot.row.computedAt.toISOString(),
          targets: {
            date,
            enabled: view.enabled,
            rows: view.targets,
            earliest: utcToday(Date.now() - (TARGET_RETENTION_DAYS - 1) * 86_400_000),
            today: utcToday(),
            subUsers,
            ...(subUser ? { subUser } : {}),
            ...(problem ? { error: `Day: ${problem}.` } : {}),
          },
        }),
      );
    }),
  );

  // --- Proxies ---

  const defaultForm = (): pages.GenerateForm => ({
    product: 'basic',
    country: 'us',
    sessionType: 'rotating',
    count: '1',
  });
  const renderProxies = async (
    res: Response,
    who: Signed,
    extra: {
      form?: pages.GenerateForm;
      generated?: string[];
      error?: string;
      notice?: string;
      allowlistForm?: pages.AllowlistForm;
      allowlistError?: string;
    } = {},
    status = 200,
  ) => {
    const creds = await readProxyCredentials(pool, who.person.accountId, deps.credentialsKey);
    const isp = await ispProxies(deps.proxies, who.person.accountId);
    const entries = (await listAllowlist(pool, who.person.accountId)) ?? [];
    const subUsers = await subUserNames(pool, who.person.accountId);
    send(
      res,
      pages.proxiesPage(who.ctx, {
        username: creds.username,
        password: creds.password,
        isp,
        form: extra.form ?? defaultForm(),
        allowlist: { entries, limit: deps.allowlist.limit },
        subUsers,
        ...extra,
      }),
      status,
    );
  };

  router.get(
    '/proxies',
    auth(async (req, res, who) =>
      renderProxies(res, who, {
        notice: typeof req.query.done === 'string' ? PROXIES_NOTICES.get(req.query.done) : undefined,
      }),
    ),
  );

  router.post(
    '/proxies/generate',
    auth(async (req, res, who) => {
      const body = req.body as Record<string, unknown>;
      const str = (k: string) => (typeof body[k] === 'string' ? body[k] : '');
      const form: pages.GenerateForm = {
        product: str('provider'),
        country: str('country').trim(),
        sessionType: str('sessionType'),
        count: str('count'),
        subUser: str('subUser'),
      };
      // The form's fields, typed as the JSON API takes them, through the API's own schema and service.
      const parsed = generateRequestSchema.safeParse({
        provider: form.product,
        country: form.country,
        sessionType: form.sessionType,
        count: form.count.trim() === '' ? undefined : Number(form.count),
        ...(form.subUser ? { subUser: form.subUser } : {}),
      });
      if (!parsed.success) {
        const labels: Record<string, string> = {
          provider: 'Product',
          country: 'Country',
          sessionType: 'Session type',
          count: 'Count',
          subUser: 'Generate for',
        };
        const error = parsed.error.issues
          .map((i) => `${labels[String(i.path[0])] ?? String(i.path[0])}: ${i.message}`)
          .join('. ');
        return renderProxies(res, who, { form, error }, 422);
      }
      try {
        const generated = await generateProxies(deps.proxies, who.person.accountId, parsed.data);
        await renderProxies(res, who, { form, generated });
      } catch (err) {
        if (err instanceof AppError && (err.code === 'NO_BANDWIDTH' || err.code === 'SUB_USER_NOT_FOUND'))
          return renderProxies(res, who, { form, error: err.message }, err.status);
        throw err;
      }
    }),
  );

  // The IP allowlist (docs/adr/0036): the API's own schema, repo and errors.
  const allowlistSchema = allowlistCreate(deps.allowlist.allowPrivate);
  router.post(
    '/proxies/allowlist',
    auth(async (req, res, who) => {
      const body = req.body as Record<string, unknown>;
      const str = (k: string) => (typeof body[k] === 'string' ? body[k].trim() : '');
      const form: pages.AllowlistForm = {
        product: str('product'),
        cidr: str('cidr'),
        targeting: str('targeting'),
      };
      const parsed = allowlistSchema.safeParse({
        product: form.product,
        cidr: form.cidr,
        ...(form.targeting ? { targeting: form.targeting } : {}),
      });
      if (!parsed.success) {
        const labels: Record<string, string> = {
          product: 'Product',
          cidr: 'Address or range',
          targeting: 'Targeting',
        };
        const allowlistError = parsed.error.issues
          .map((i) => `${labels[String(i.path[0])] ?? String(i.path[0])}: ${i.message}`)
          .join('. ');
        return renderProxies(res, who, { allowlistForm: form, allowlistError }, 422);
      }
      try {
        await addAllowlistEntry(pool, who.person.accountId, parsed.data, deps.allowlist.limit);
      } catch (err) {
        if (err instanceof AppError && err.status === 409)
          return renderProxies(res, who, { allowlistForm: form, allowlistError: err.message }, 409);
        throw err;
      }
      res.redirect(303, '/proxies?done=allowlist-added');
    }),
  );

  router.post(
    '/proxies/allowlist/:entryId/remove',
    auth(async (req, res, who) => {
      const entryId = String(req.params.entryId);
      const removed =
        uuid.safeParse(entryId).success && (await removeAllowlistEntry(pool, who.person.accountId, entryId));
      if (!removed)
        return renderProxies(
          res,
          who,
          { allowlistError: 'That entry does not exist or is already removed.' },
          404,
        );
      res.redirect(303, '/proxies?done=allowlist-removed');
    }),
  );

  router.get(
    '/proxies/reset-password',
    auth((_req, res, { ctx }) =>
      Promise.resolve(
        send(
          res,
          pages.confirmPage(ctx, {
            title: 'Issue a new password for the gateways?',
            text: 'A new password is issued and the current one stops working on every gateway within seconds.',
            action: '/proxies/reset-password',
            confirm: 'Reset password',
            back: '/proxies',
          }),
        ),
      ),
    ),
  );

  router.post(
    '/proxies/reset-password',
    auth(async (_req, res, { person }) => {
      await resetProxyPassword(pool, person.accountId, deps.credentialsKey);
      await deps.waitForApiCaches();
      res.redirect(303, '/proxies?done=password');
    }),
  );

  // --- Sub-users (issue 16 item 1, docs/adr/0037): the API's own schemas, repo and errors ---

  const SUB_USER_NOTICES: ReadonlyMap<string, string> = new Map([
    ['created', 'The sub-user is created; gateways accept its credentials within a second.'],
    ['saved', 'The sub-user is saved; gateways apply it within a second.'],
    ['suspended', 'The sub-user is suspended; its connections are ended.'],
    ['active', 'The sub-user is resumed.'],
    ['password', 'A new password is in place for the sub-user.'],
    ['deleted', 'The sub-user is deleted.'],
  ]);
  const subUserLabels: Record<string, string> = {
    name: 'Name',
    username: 'Proxy username',
    password: 'Proxy password',
    maxConnections: 'Connection cap',
    bytesPerSecond: 'Bandwidth cap',
  };
  /** "trafficLimits.basic: must be at least 0" -> "basic limit: must be at least 0." */
  const subUserProblem = (error: z.ZodError) =>
    validationError(error)
      .message.slice('Invalid request: '.length)
      .split('; ')
      .map((part) => {
        const [field = '', ...rest] = part.split(': ');
        const label = field.startsWith('trafficLimits.')
          ? `${field.slice('trafficLimits.'.length)} limit`
          : (subUserLabels[field] ?? field);
        return `${label}: ${rest.join(': ')}.`;
      })
      .join(' ');
  const subUserForm = (body: Record<string, unknown>): pages.SubUserForm => {
    const str = (k: string) => (typeof body[k] === 'string' ? body[k].trim() : '');
    return {
      name: str('name'),
      username: str('username'),
      password: str('password'),
      maxConnections: str('maxConnections'),
      bytesPerSecond: str('bytesPerSecond'),
      limits: Object.fromEntries(PRODUCTS.map((p) => [p, str(`limit_${p}`)])),
    };
  };
  /** An empty field: left out when creating, removed (null) when editing. */
  const numberOr = (v: string, empty: null | undefined) => (v === '' ? empty : Number(v));
  const formFromSubUser = (s: SubUser): pages.SubUserForm => ({
    name: s.name,
    username: s.username,
    password: '',
    maxConnections: s.maxConnections === null ? '' : String(s.maxConnections),
    bytesPerSecond: s.bytesPerSecond === null ? '' : String(s.bytesPerSecond),
    limits: Object.fromEntries(
      PRODUCTS.map((p) => [p, s.products[p].limitGb === null ? '' : String(s.products[p].limitGb)]),
    ),
  });

  const renderSubUsers = async (
    res: Response,
    who: Signed,
    extra: { form?: pages.SubUserForm; error?: string; notice?: string } = {},
    status = 200,
  ) => {
    const subUsers = (await listSubUsers(pool, who.person.accountId, deps.credentialsKey)) ?? [];
    send(res, pages.subUsersPage(who.ctx, { subUsers, limit: deps.subUsers.limit, ...extra }), status);
  };
  const missingSubUser = 'That sub-user does not exist or is already deleted.';
  /** The sub-user of the path, if it is the account's. */
  const pathSubUser = async (req: Request, who: Signed): Promise<SubUser | undefined> => {
    const id = String(req.params.subUserId);
    return uuid.safeParse(id).success
      ? getSubUser(pool, who.person.accountId, id, deps.credentialsKey)
      : undefined;
  };

  router.get(
    '/sub-users',
    auth(async (req, res, who) =>
      renderSubUsers(res, who, {
        notice: typeof req.query.done === 'string' ? SUB_USER_NOTICES.get(req.query.done) : undefined,
      }),
    ),
  );

  router.post(
    '/sub-users',
    auth(async (req, res, who) => {
      const form = subUserForm(req.body as Record<string, unknown>);
      const limits = Object.fromEntries(
        PRODUCTS.filter((p) => form.limits[p] !== '').map((p) => [p, Number(form.limits[p])]),
      );
      const parsed = subUserCreate.safeParse({
        name: form.name,
        ...(form.username ? { username: form.username } : {}),
        ...(form.password ? { password: form.password } : {}),
        maxConnections: numberOr(form.maxConnections, undefined),
        bytesPerSecond: numberOr(form.bytesPerSecond, undefined),
        ...(Object.keys(limits).length ? { trafficLimits: limits } : {}),
      });
      if (!parsed.success)
        return renderSubUsers(res, who, { form, error: subUserProblem(parsed.error) }, 422);
      try {
        await createSubUser(
          pool,
          who.person.accountId,
          parsed.data,
          deps.subUsers.limit,
          deps.credentialsKey,
        );
      } catch (err) {
        if (err instanceof AppError && err.status === 409)
          return renderSubUsers(res, who, { form, error: err.message }, 409);
        throw err;
      }
      res.redirect(303, '/sub-users?done=created');
    }),
  );

  router.get(
    '/sub-users/:subUserId',
    auth(async (req, res, who) => {
      const subUser = await pathSubUser(req, who);
      if (!subUser) return renderSubUsers(res, who, { error: missingSubUser }, 404);
      send(res, pages.subUserEditPage(who.ctx, { subUser, form: formFromSubUser(subUser) }));
    }),
  );

  router.post(
    '/sub-users/:subUserId',
    auth(async (req, res, who) => {
      const subUser = await pathSubUser(req, who);
      if (!subUser) return renderSubUsers(res, who, { error: missingSubUser }, 404);
      const form = subUserForm(req.body as Record<string, unknown>);
      const parsed = subUserUpdate.safeParse({
        name: form.name,
        maxConnections: numberOr(form.maxConnections, null),
        bytesPerSecond: numberOr(form.bytesPerSecond, null),
        trafficLimits: Object.fromEntries(PRODUCTS.map((p) => [p, numberOr(form.limits[p] ?? '', null)])),
      });
      const again = (error: string, status: number) =>
        send(res, pages.subUserEditPage(who.ctx, { subUser, form, error }), status);
      if (!parsed.success) return again(subUserProblem(parsed.error), 422);
      try {
        const saved = await updateSubUser(
          pool,
          who.person.accountId,
          subUser.id,
          parsed.data,
          deps.credentialsKey,
        );
        if (!saved) return renderSubUsers(res, who, { error: missingSubUser }, 404);
      } catch (err) {
        if (err instanceof AppError && err.status === 409) return again(err.message, 409);
        throw err;
      }
      res.redirect(303, '/sub-users?done=saved');
    }),
  );

  router.post(
    '/sub-users/:subUserId/status',
    auth(async (req, res, who) => {
      const status = z.enum(['active', 'suspended']).safeParse((req.body as Record<string, unknown>).status);
      const subUser = await pathSubUser(req, who);
      if (!subUser || !status.success) return renderSubUsers(res, who, { error: missingSubUser }, 404);
      await updateSubUser(
        pool,
        who.person.accountId,
        subUser.id,
        { status: status.data },
        deps.credentialsKey,
      );
      res.redirect(303, `/sub-users?done=${status.data}`);
    }),
  );

  router.get(
    '/sub-users/:subUserId/reset-password',
    auth(async (req, res, who) => {
      const subUser = await pathSubUser(req, who);
      if (!subUser) return renderSubUsers(res, who, { error: missingSubUser }, 404);
      send(
        res,
        pages.confirmPage(who.ctx, {
          title: `Issue a new password for “${subUser.name}”?`,
          text: 'The current password stops working on every gateway within seconds; its open connections end.',
          action: `/sub-users/${subUser.id}/reset-password`,
          confirm: 'Issue new password',
          back: '/sub-users',
        }),
      );
    }),
  );

  router.post(
    '/sub-users/:subUserId/reset-password',
    auth(async (req, res, who) => {
      const subUser = await pathSubUser(req, who);
      if (!subUser) return renderSubUsers(res, who, { error: missingSubUser }, 404);
      await updateSubUser(
        pool,
        who.person.accountId,
        subUser.id,
        { resetPassword: true },
        deps.credentialsKey,
      );
      res.redirect(303, '/sub-users?done=password');
    }),
  );

  router.get(
    '/sub-users/:subUserId/delete',
    auth(async (req, res, who) => {
      const subUser = await pathSubUser(req, who);
      if (!subUser) return renderSubUsers(res, who, { error: missingSubUser }, 404);
      send(
        res,
        pages.confirmPage(who.ctx, {
          title: `Delete the sub-user “${subUser.name}”?`,
          text: 'Its credentials stop working within seconds and its usage figures are deleted. This cannot be undone.',
          action: `/sub-users/${subUser.id}/delete`,
          confirm: 'Delete',
          back: '/sub-users',
        }),
      );
    }),
  );

  router.post(
    '/sub-users/:subUserId/delete',
    auth(async (req, res, who) => {
      const id = String(req.params.subUserId);
      if (!uuid.safeParse(id).success || !(await deleteSubUser(pool, who.person.accountId, id)))
        return renderSubUsers(res, who, { error: missingSubUser }, 404);
      res.redirect(303, '/sub-users?done=deleted');
    }),
  );

  // --- API keys ---

  const renderKeys = async (
    res: Response,
    who: Signed,
    extra: { newKey?: { apiKey: string; label: string }; error?: string; notice?: string } = {},
    status = 200,
  ) => {
    const keys = await listKeys(pool, who.person.accountId);
    send(res, pages.keysPage(who.ctx, { keys, limit: MAX_NAMED_KEYS, ...extra }), status);
  };

  router.get(
    '/keys',
    auth(async (req, res, who) =>
      renderKeys(res, who, { notice: req.query.done === 'revoked' ? 'The key is revoked.' : undefined }),
    ),
  );

  router.get(
    '/keys/regenerate',
    auth((_req, res, { ctx }) =>
      Promise.resolve(
        send(
          res,
          pages.confirmPage(ctx, {
            title: 'Regenerate the primary key?',
            text: 'A new primary key is issued and the current one stops working at once, on every server.',
            action: '/keys/regenerate',
            confirm: 'Regenerate',
            back: '/keys',
          }),
        ),
      ),
    ),
  );

  router.post(
    '/keys/regenerate',
    auth(async (_req, res, who) => {
      const key = await regeneratePrimaryKey(pool, who.person.accountId);
      // As the admin API: shown only once every API process refuses the old key.
      await deps.waitForApiCaches();
      await renderKeys(res, who, { newKey: { apiKey: key.apiKey, label: 'Your new primary key' } });
    }),
  );

  router.post(
    '/keys',
    auth(async (req, res, who) => {
      const raw = (req.body as Record<string, unknown>).name;
      // The admin API's rules for names, from its own schema.
      const parsed = createKeySchema.safeParse({ name: typeof raw === 'string' ? raw.trim() : '' });
      if (!parsed.success) {
        const why = parsed.error.issues[0]?.message ?? 'invalid';
        return renderKeys(res, who, { error: `Key name: ${why} (1 to 64 characters).` }, 422);
      }
      const { name } = parsed.data;
      try {
        const key = await createNamedKey(pool, who.person.accountId, name);
        await renderKeys(res, who, { newKey: { apiKey: key.apiKey, label: `Your new key “${name}”` } }, 201);
      } catch (err) {
        if (err instanceof AppError && (err.code === 'NAMED_KEY_LIMIT' || err.code === 'KEY_NAME_TAKEN'))
          return renderKeys(res, who, { error: err.message }, 409);
        throw err;
      }
    }),
  );

  router.get(
    '/keys/:keyId/revoke',
    auth(async (req, res, who) => {
      const keyId = String(req.params.keyId);
      const kind = uuid.safeParse(keyId).success
        ? await activeKeyKind(pool, who.person.accountId, keyId)
        : undefined;
      if (kind !== 'named')
        return renderKeys(res, who, { error: 'That key does not exist or is already revoked.' }, 404);
      const key = (await listKeys(pool, who.person.accountId)).find((k) => k.id === keyId);
      send(
        res,
        pages.confirmPage(who.ctx, {
          title: `Revoke the key “${key?.name ?? ''}”?`,
          text: 'It stops working at once, on every server. This cannot be undone.',
          action: `/keys/${keyId}/revoke`,
          confirm: 'Revoke',
          back: '/keys',
        }),
      );
    }),
  );

  router.post(
    '/keys/:keyId/revoke',
    auth(async (req, res, who) => {
      const keyId = String(req.params.keyId);
      // The admin API's rules: only active named keys; the primary key is regenerated, never revoked.
      const kind = uuid.safeParse(keyId).success
        ? await activeKeyKind(pool, who.person.accountId, keyId)
        : undefined;
      if (kind !== 'named' || !(await revokeKey(pool, who.person.accountId, keyId))) {
        return renderKeys(res, who, { error: 'That key does not exist or is already revoked.' }, 404);
      }
      await deps.waitForApiCaches();
      res.redirect(303, '/keys?done=revoked');
    }),
  );

  // --- Alerts ---

  const currentAlerts = async (accountId: string): Promise<AlertsRow> => {
    const alerts = await repo.readAlerts(pool, accountId);
    if (!alerts) throw new AppError('ACCOUNT_NOT_FOUND');
    return alerts;
  };

  router.get(
    '/alerts',
    auth(async (req, res, { person, ctx }) =>
      send(
        res,
        pages.alertsPage(ctx, {
          alerts: await currentAlerts(person.accountId),
          targetStats: (await readTargetStatsEnabled(pool, person.accountId)) ?? true,
          notice:
            req.query.done === 'saved'
              ? 'Alert settings saved.'
              : req.query.done === 'privacy'
                ? 'Privacy setting saved.'
                : undefined,
        }),
      ),
    ),
  );

  router.post(
    '/alerts',
    auth(async (req, res, { person, ctx }) => {
      const form = alertsForm.safeParse(req.body);
      if (!form.success) {
        return send(
          res,
          pages.alertsPage(ctx, {
            alerts: await currentAlerts(person.accountId),
            targetStats: (await readTargetStatsEnabled(pool, person.accountId)) ?? true,
            error: 'Low-bandwidth threshold: a whole number from 1 to 99.',
          }),
          422,
        );
      }
      await updateAlerts(pool, person.accountId, {
        lowBandwidth: form.data.lowBandwidth === 'on',
        newInvoice: form.data.newInvoice === 'on',
        serverAlerts: form.data.serverAlerts === 'on',
        lowBandwidthPercent: form.data.lowBandwidthPercent,
      });
      await deps.waitForApiCaches();
      res.redirect(303, '/alerts?done=saved');
    }),
  );

  // Target statistics on or off (docs/adr/0026): an unticked box is absent from the form.
  router.post(
    '/target-stats',
    auth(async (req, res, { person }) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      await setTargetStats(pool, person.accountId, body.targetStats === 'on');
      res.redirect(303, '/alerts?done=privacy');
    }),
  );

  // --- Billing ---

  const renderBilling = async (
    res: Response,
    who: Signed,
    state: { notice?: string; error?: string },
    status = 200,
  ) => {
    const [invoices, autoRefill] = await Promise.all([
      listInvoices(pool, who.person.accountId),
      listAutoRefill(pool, who.person.accountId),
    ]);
    send(res, pages.billingPage(who.ctx, { invoices, autoRefill, ...state }), status);
  };
  const unknownProduct = 'There is no such product.';

  router.get(
    '/billing',
    auth(async (req, res, who) =>
      renderBilling(res, who, { notice: req.query.done === 'refill' ? 'Auto-refill saved.' : undefined }),
    ),
  );

  router.get(
    '/billing/auto-refill/:product',
    auth(async (req, res, who) => {
      const p = product.safeParse(req.params.product);
      if (!p.success) return renderBilling(res, who, { error: unknownProduct }, 404);
      const settings = await getAutoRefill(pool, who.person.accountId, p.data);
      send(res, pages.autoRefillPage(who.ctx, { settings, form: pages.autoRefillFormValues(settings) }));
    }),
  );

  router.post(
    '/billing/auto-refill/:product',
    auth(async (req, res, who) => {
      const p = product.safeParse(req.params.product);
      if (!p.success) return renderBilling(res, who, { error: unknownProduct }, 404);
      const raw = autoRefillForm.safeParse(req.body);
      const form = raw.success ? raw.data : { thresholdGb: '', refillGb: '', maxRefillsPerMonth: '' };
      // Empty or non-numeric fields become NaN, which the API's schema refuses, naming the field.
      const number = (v: string) => (v.trim() === '' ? Number.NaN : Number(v));
      const update = autoRefillUpdateSchema.safeParse({
        enabled: form.enabled === 'on',
        thresholdGb: number(form.thresholdGb),
        refillGb: number(form.refillGb),
        maxRefillsPerMonth: number(form.maxRefillsPerMonth),
      });
      if (!raw.success || !update.success) {
        // Nothing is lost: the form comes back with what was typed and what is wrong with it.
        return send(
          res,
          pages.autoRefillPage(who.ctx, {
            settings: await getAutoRefill(pool, who.person.accountId, p.data),
            form: { ...form, enabled: form.enabled === 'on' },
            error: update.success ? 'The form could not be read.' : pages.autoRefillProblem(update.error),
          }),
          422,
        );
      }
      await putAutoRefill(pool, who.person.accountId, p.data, update.data);
      res.redirect(303, '/billing?done=refill');
    }),
  );

  return router;
}

function chartData(
  daily: repo.DailyUsage[],
  products: { product: string; total: number }[],
): pages.ChartData {
  const days: string[] = [];
  const today = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  for (let i = CHART_DAYS - 1; i >= 0; i--)
    days.push(new Date(today - i * 86_400_000).toISOString().slice(0, 10));
  const shown = PRODUCTS.filter(
    (p) => products.some((x) => x.product === p && x.total > 0) || daily.some((d) => d.product === p),
  );
  const index = new Map(days.map((d, i) => [d, i]));
  const series = shown.map(() => days.map(() => 0));
  for (const d of daily) {
    const i = index.get(d.day);
    const s = shown.indexOf(d.product as (typeof PRODUCTS)[number]);
    if (i !== undefined && s >= 0) series[s]![i] = Number((d.bytes / 1e6).toFixed(3));
  }
  return { days, products: shown, series };
}
