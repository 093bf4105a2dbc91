// What a dashboard page is (docs/adr/0061). A page is a module under pages/ that holds its paths,
// handlers and templates and exports one factory: from the dashboard's dependencies to its
// navigation entry and its routes. The router (router.ts) mounts every page's routes behind the
// session and CSRF checks, answers only their paths, and lists the pages in navigation order:
// a new page is a new module and one line in that list.
import type Stripe from 'stripe';
import type { Request, Response } from 'express';
import type { Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import type { ResetRequests } from '#api/modules/password-links/reset-requests.ts';
import type { ProxiesDeps } from '#api/modules/proxies/service.ts';
import type { PurchaseLimits } from '#api/modules/purchases/schemas.ts';
import type { Seller } from '#api/modules/billing/pdf.ts';
import type { SubscribeDeps } from '#api/modules/subscriptions/service.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import type { UsageService } from '#api/modules/usage/service.ts';
import type { Html } from './html.ts';
import type { NavEntry, PageContext } from './layout.ts';
import type { Person } from './repo.ts';

export interface DashboardDeps {
  pool: Pool;
  logger: Logger;
  credentialsKey: Buffer;
  usage: UsageService;
  proxies: ProxiesDeps;
  /** The IP allowlist's cap and range rules (docs/adr/0036), as the API applies them. */
  allowlist: { limit: number; allowPrivate: boolean };
  /** Sub-users' cap (docs/adr/0037), as the API applies it. */
  subUsers: { limit: number };
  /** What a customer may buy themselves, as POST /api/v1/purchases applies it. */
  purchaseLimits: PurchaseLimits;
  /** Customers' own subscriptions, as POST /api/v1/subscriptions makes them (its payment methods, limits). */
  subscribe: SubscribeDeps;
  /** The seller named on invoice PDFs (PROXYFLEET_SELLER_*). */
  seller: Seller;
  waitForApiCaches: WaitForApiCaches;
  /**
   * PROXYFLEET_DASHBOARD_HTTPS: every request's cookies Secure with the __Host- prefix; otherwise
   * those of a request that came over HTTPS (req.secure), as HSTS (session.ts overHttps).
   */
  https: boolean;
  /** "Forgot password?" asks, looked up and mailed after the answer (password-links/reset-requests.ts). */
  resetRequests: ResetRequests;
  /** Card payments (docs/adr/0110); null: off, the Billing page says purchases are billed by invoice. */
  stripe: Stripe | null;
  /** The dashboard's base URL, where Stripe sends the customer back. */
  linkBase: () => string;
}

/** One request to a page, as the router hands it over. */
export interface Visit {
  req: Request;
  res: Response;
  /** The signed-in person; undefined for a visitor who is signed out. */
  person: Person | undefined;
  /**
   * The page context: CSRF token, assets, navigation. Signed out, reading it sets the pre-session
   * cookie the page's forms are bound to.
   */
  readonly ctx: PageContext;
  /** Answers with a page: HTML, never cached. */
  send: (page: Html, status?: number) => void;
  /** Sign-in: a new session for the account; `details` (how) go to its audit entry. */
  startSession: (accountId: string, details?: Record<string, unknown>) => Promise<void>;
  /** Sign-out: this session ends everywhere. */
  endSession: () => Promise<void>;
}

export interface SignedInVisit extends Visit {
  person: Person;
}

export interface PageRoute {
  method: 'get' | 'post';
  /** An Express path; `:name` is one path segment. */
  path: string;
  /** For everyone, forms bound to the pre-session cookie; else for signed-in people only. */
  signedOut: boolean;
  handler(visit: Visit): Promise<void> | void;
}

export interface Page {
  /** Its entries in the navigation (shown when signed in): the page, and maybe links into its sections. */
  nav?: readonly NavEntry[];
  routes: PageRoute[];
}

export type PageModule = (deps: DashboardDeps) => Page;

type Handler<V extends Visit> = (visit: V) => Promise<void> | void;

// PageRoute.handler is a method, so it takes a handler of the narrower SignedInVisit: the router
// calls a signed-in route only with a person (others get the sign-in page).
const route =
  <V extends Visit>(method: PageRoute['method'], signedOut: boolean) =>
  (path: string, handler: Handler<V>): PageRoute => ({ method, path, signedOut, handler });

/** A page or action for signed-in people. */
export const get = route<SignedInVisit>('get', false);
export const post = route<SignedInVisit>('post', false);

/** A page or action for everyone, before sign-in (its forms are bound to the pre-session cookie). */
export const signedOut = { get: route<Visit>('get', true), post: route<Visit>('post', true) };
