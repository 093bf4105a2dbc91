// The customer dashboard at / (docs/adr/0050, its shape docs/adr/0061): server-rendered pages, form
// posts with a CSRF token, sessions in PostgreSQL. This router holds only what every page shares:
// headers, the body parser, the session, the CSRF check and the mounting of the pages listed
// below. Each page (pages/) holds its paths, handlers and templates and calls the same operations
// as the API; like the admin API, an action answers once every API process has applied it.
import express, { type Request, type Response, type Router } from 'express';
import helmet from 'helmet';
import { rejectNul } from '#api/http/plumbing.ts';
import { loadAssets } from './assets.ts';
import type { Html } from './html.ts';
import { forbiddenPage, type PageContext } from './layout.ts';
import type { DashboardDeps, Page, PageModule, PageRoute, Visit } from './page.ts';
import { billingPage } from './pages/billing.ts';
import { activityPage } from './pages/activity.ts';
import { overviewPage } from './pages/overview.ts';
import { proxiesPage } from './pages/proxies.ts';
import { securityPage } from './pages/security.ts';
import { settingsPage } from './pages/settings.ts';
import { signInPage, signInView } from './pages/sign-in.ts';
import { subUsersPage } from './pages/sub-users.ts';
import { usagePage } from './pages/usage.ts';
import type { Person } from './repo.ts';
import { csrfKeyFrom, Sessions } from './session.ts';

/** The pages, in navigation order. */
export const PAGES: PageModule[] = [
  signInPage,
  overviewPage,
  usagePage,
  proxiesPage,
  subUsersPage,
  billingPage,
  settingsPage,
  securityPage,
  activityPage,
];

const BODY_LIMIT = '16kb';
const ASSET_PATH = '/assets/:name';

/** `/sub-users/:subUserId/status` -> /^\/sub-users\/[^/]+\/status$/ (exact, case-sensitive). */
function pathPattern(path: string): string {
  return path
    .split('/')
    .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
}

/** Every path the pages answer (and the assets'), so only these reach the dashboard's middleware. */
export function pathsOf(pages: Page[]): RegExp {
  const paths = [...new Set([...pages.flatMap((p) => p.routes.map((r) => r.path)), ASSET_PATH])];
  return new RegExp(`^(?:${paths.map(pathPattern).join('|')})$`);
}

export function dashboardRouter(deps: DashboardDeps): Router {
  const pages = PAGES.map((page) => page(deps));
  const routes = pages.flatMap((p) => p.routes);
  const dashboardPath = pathsOf(pages);
  const signedOutPaths = new Set(routes.filter((r) => r.signedOut).map((r) => r.path));
  const nav = pages.flatMap((p) => p.nav ?? []);
  const assets = loadAssets();
  const sessions = new Sessions({
    pool: deps.pool,
    https: deps.https,
    csrfKey: csrfKeyFrom(deps.credentialsKey),
  });
  const router = express.Router();

  // Only the dashboard's own paths go through its headers, body parser, session and CSRF check;
  // anything else (an unknown /api/v1 path, say) leaves for the API's JSON 404/405.
  router.use((req, _res, next) => (dashboardPath.test(req.path) ? next() : next('router')));
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
      // HSTS is the plumbing's, on HTTPS responses only; DENY matches frame-ancestors 'none'.
      strictTransportSecurity: false,
      xFrameOptions: { action: 'deny' },
      referrerPolicy: { policy: 'no-referrer' },
      crossOriginEmbedderPolicy: false,
    }),
  );
  router.use(express.urlencoded({ extended: false, limit: BODY_LIMIT, parameterLimit: 50 }));
  router.use(rejectNul);

  const send = (res: Response, page: Html, status = 200) => {
    res.status(status).type('html').set('Cache-Control', 'no-store').send(page.text);
  };
  /** Signed-out pages: their forms are bound to the pre-session cookie. */
  const anon = (req: Request, res: Response): PageContext => ({
    assets,
    nav,
    csrf: sessions.csrfToken(sessions.preSession(req, res)),
  });

  // Every POST carries a CSRF token: bound to the session when signed in, to the pre-session cookie before.
  interface SignedIn {
    person: Person;
    ctx: PageContext;
  }
  const signedIn = new WeakMap<Request, SignedIn>();
  router.use(async (req, res, next) => {
    try {
      const current = await sessions.current(req);
      if (current) {
        signedIn.set(req, {
          person: current.person,
          ctx: {
            assets,
            nav,
            csrf: sessions.csrfToken(current.token),
            email: current.person.email,
            current: req.path,
          },
        });
      }
      if (
        req.method === 'POST' &&
        !sessions.csrfValid(req, current !== undefined && !signedOutPaths.has(req.path))
      ) {
        return send(res, forbiddenPage(current ? signedIn.get(req)!.ctx : anon(req, res)), 403);
      }
      next();
    } catch (err) {
      next(err);
    }
  });

  const visit = (req: Request, res: Response): Visit => {
    const who = signedIn.get(req);
    return {
      req,
      res,
      person: who?.person,
      get ctx() {
        return who?.ctx ?? anon(req, res);
      },
      send: (page, status) => send(res, page, status),
      startSession: (accountId, details) => sessions.start(req, res, accountId, details),
      endSession: () => sessions.end(req, res),
    };
  };
  const mount = (route: PageRoute) =>
    router[route.method](route.path, async (req, res) => {
      // A page for signed-in people: others get the sign-in page at /, else are sent to sign in.
      if (!route.signedOut && !signedIn.has(req)) {
        if (req.method === 'GET' && req.path === '/') return send(res, signInView(anon(req, res)));
        return res.redirect(303, '/sign-in');
      }
      await route.handler(visit(req, res));
    });
  routes.forEach(mount);
  return router;
}
