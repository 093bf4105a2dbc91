// Test harness: the customer dashboard in a real Chromium (Debian's, driven by playwright-core)
// against the real API and database. The API logs at debug level into `logLines` (the tests check
// no secret reaches the log); `seenUrls` holds every URL the first page requested.
// PROXYFLEET_DASHBOARD_SCREENSHOTS=<dir> saves screenshots.
import { describe, expect } from '@jest/globals';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import {
  chromium,
  type Browser,
  type BrowserContext,
  type LaunchOptions,
  type Locator,
  type Page,
} from 'playwright-core';
import { AxeBuilder } from '@axe-core/playwright';
import { call, startTestApi, type CallOptions, type CallResult, type TestApi } from './api.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { exampleEmail, TEST_ADMIN_TOKEN } from './fixtures.ts';
import { basicAuth, curlStatus, get, rawExchange } from './gateway/client.ts';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = process.env.PROXYFLEET_DASHBOARD_SCREENSHOTS;
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`SKIPPED: dashboard browser tests need ${CHROMIUM} (.ci/run installs it)`);

/** `describe` where Chromium is installed (always in CI, where its absence fails the run). */
export const describeInChromium = haveChromium || process.env.CI === 'true' ? describe : describe.skip;

/** A password the strength check accepts. */
export const STRONG = 'velvet Anchor tiptoe 93 marmalade';

export interface DashboardRun {
  db: TestDatabase;
  api: TestApi;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** Every URL `page` requested. */
  seenUrls: string[];
  /** Every log line the API wrote, at debug level. */
  logLines: string[];
  close(): Promise<void>;
}

/** A database, an API on it (with `env` besides the test's) and a browser with one page. */
export async function startDashboardRun(env: Record<string, string> = {}): Promise<DashboardRun> {
  const db = await createTestDatabase();
  const logLines: string[] = [];
  // One trusted proxy hop: the throttling test sends X-Forwarded-For to act from other addresses.
  const api = await startTestApi(db, {
    env: { PROXYFLEET_API_TRUST_PROXY_HOPS: '1', ...env },
    logLevel: 'debug',
    logStream: new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(chunk.toString());
        done();
      },
    }),
  });
  const browser = await launchChromium();
  const context = await newContext(browser, api.url);
  const page = await context.newPage();
  const seenUrls: string[] = [];
  page.on('request', (r) => seenUrls.push(r.url()));
  return {
    db,
    api,
    browser,
    context,
    page,
    seenUrls,
    logLines,
    async close() {
      await browser.close();
      await api.close();
      await db.drop();
    },
  };
}

/**
 * Debian's Chromium, headless, with nothing of its own on the network; `extra`: a proxy, and
 * arguments after the common ones (a test's trusted certificate keys).
 */
export function launchChromium(extra: Pick<LaunchOptions, 'proxy' | 'args'> = {}): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    ...(extra.proxy ? { proxy: extra.proxy } : {}),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      ...(extra.args ?? []),
    ],
  });
}

export async function newContext(
  browser: Browser,
  apiUrl: string,
  viewport = { width: 1280, height: 900 },
): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport, acceptDownloads: true, baseURL: apiUrl });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: apiUrl });
  // A bound, not a measurement: scrypt sign-ins on a loaded 2-core machine take seconds.
  ctx.setDefaultTimeout(30_000);
  return ctx;
}

export const adminCall = (api: TestApi, p: string, o: CallOptions = {}): Promise<CallResult> =>
  call(api.url, `/admin/v1${p}`, { admin: TEST_ADMIN_TOKEN, ...o });

/** An account as the admin API creates it: its first API key and its proxy credentials. */
export interface NewCustomer {
  id: string;
  email: string;
  apiKey: string;
  proxyUsername: string;
  proxyPassword: string;
}

/** A customer an operator made (its email after `label`), with 1 GB of basic bought. */
export async function newCustomer(api: TestApi, label: string): Promise<NewCustomer> {
  const created = await adminCall(api, '/accounts', { body: { email: exampleEmail(label) } });
  expect(created.status).toBe(201);
  const account = created.body as NewCustomer;
  const purchase = { body: { product: 'basic', gb: 1 } };
  expect((await adminCall(api, `/accounts/${account.id}/purchases`, purchase)).status).toBe(201);
  return account;
}

/** No serious or critical axe-core violation on the page as it is now. */
export async function axe(p: Page, name: string): Promise<void> {
  const result = await new AxeBuilder({ page: p }).analyze();
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect({
    page: name,
    violations: bad.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
  }).toEqual({ page: name, violations: [] });
}

export async function shot(p: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await p.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/** Fills and sends the sign-in form (the page's context has the API as its base URL). */
export async function signIn(p: Page, email: string, password: string): Promise<void> {
  await p.goto('/sign-in');
  await p.getByLabel('Email').fill(email);
  await p.getByLabel('Password').fill(password);
  await p.getByRole('button', { name: 'Sign in' }).click();
}

/**
 * The signed-out forms' CSRF token and pre-session cookie, as a plain HTTP client gets them
 * (__Host-pf_pre when `headers` make the request HTTPS through a trusted proxy).
 */
export async function signedOutForm(
  apiUrl: string,
  headers: Record<string, string> = {},
): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${apiUrl}/sign-in`, { headers });
  const cookie = res.headers
    .getSetCookie()
    .find((c) => /^(__Host-)?pf_pre=/.test(c))!
    .split(';')[0]!;
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await res.text())![1]!;
  return { cookie, csrf };
}

/** The signed-in browser's session cookie, for a form posted beside the browser (postForm). */
export const sessionCookie = async (run: Pick<DashboardRun, 'context'>): Promise<string> =>
  (await run.context.cookies())
    .filter((c) => c.name === 'pf_session')
    .map((c) => `${c.name}=${c.value}`)
    .join('; ');

/** A form post by a plain HTTP client; redirects are not followed. */
export async function postForm(
  apiUrl: string,
  pathName: string,
  fields: Record<string, string>,
  cookie: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${apiUrl}${pathName}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, ...headers },
    body: new URLSearchParams(fields).toString(),
  });
}

/** The password step of a two-factor sign-in: the pre-session cookie and CSRF token waiting for a code. */
export async function waitingForCode(
  apiUrl: string,
  email: string,
  password = STRONG,
): Promise<{ cookie: string; csrf: string }> {
  const form = await signedOutForm(apiUrl);
  const res = await postForm(apiUrl, '/sign-in', { _csrf: form.csrf, email, password }, form.cookie);
  expect([res.status, res.headers.get('location')]).toEqual([303, '/sign-in/code']);
  return form;
}

/** A generated proxy line host:port:user:pass used for one plain-HTTP GET: the status it got. */
export async function proxyLineStatus(line: string, url: string): Promise<number> {
  const [host, port, user, ...rest] = line.split(':');
  expect(host).toBe('127.0.0.1');
  const [answer] = (await rawExchange(Number(port), [get(url, basicAuth(user!, rest.join(':')))])).responses;
  return answer!.status;
}

/** The same GET through the same proxy line as SOCKS5, by curl: the HTTP status curl got. */
export function proxyLineSocksStatus(line: string, url: string): Promise<string> {
  const [host, port, user, ...rest] = line.split(':');
  return curlStatus(url, [
    '--socks5-hostname',
    `${host}:${port}`,
    '--proxy-user',
    `${user}:${rest.join(':')}`,
  ]);
}

/**
 * The customer's first visit: an operator's invite link, "New password" set to STRONG, then signed
 * in on `run.page` (the Overview open). Returns the invite link.
 */
export async function signInThroughInvite(
  run: DashboardRun,
  account: { id: string; email: string },
): Promise<string> {
  const invite = await adminCall(run.api, `/accounts/${account.id}/dashboard-invite`, { method: 'POST' });
  const inviteUrl = (invite.body as { url: string }).url;
  await acceptInvite(run.page, run.api.url, inviteUrl, account.email);
  return inviteUrl;
}

/** An invite link opened on `page`, "New password" set to STRONG, then signed in (the Overview open). */
export async function acceptInvite(page: Page, apiUrl: string, inviteUrl: string, email: string) {
  await page.goto(inviteUrl);
  await page.getByLabel('New password').fill(STRONG);
  await page.getByRole('button', { name: 'Set password' }).click();
  await page.waitForURL(`${apiUrl}/sign-in?done=password`);
  await signIn(page, email, STRONG);
  await page.waitForURL(`${apiUrl}/`);
}

/** The text of each cell of each body row of `table` (or of the tables it holds), whitespace folded. */
export const rowCells = (table: Locator): Promise<string[][]> =>
  table
    .locator('tbody tr')
    .evaluateAll((trs) =>
      trs.map((tr) =>
        [...tr.querySelectorAll('th, td')].map((td) => (td.textContent ?? '').replace(/\s+/g, ' ').trim()),
      ),
    );

/** The text of each cell of each body row of the table labelled `label`, whitespace folded. */
export const tableCells = (p: Page, label: string): Promise<string[][]> =>
  rowCells(p.getByRole('region', { name: label }));
