// The dashboard end to end in a real Chromium (Debian's, driven by playwright-core), against the
// real API, database and a real gateway: invite, set password, sign in, every page with an axe-core
// check, keys, sub-users, alerts, the proxy generator used through the gateway, CSRF, cookies, sign-out,
// throttling, and a 375-px-wide run. PROXYFLEET_DASHBOARD_SCREENSHOTS=<dir> saves screenshots.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { AxeBuilder } from '@axe-core/playwright';
import { sha256 } from '#common/secrets.ts';
import { upsertGatewayEndpoint } from '#common/gateway-endpoints.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { until } from '#test/process.ts';
import {
  basicAuth,
  cacheSynced,
  fold,
  gatewaySpec,
  rawExchange,
  get,
  startOrigin,
  startTestGateway,
  type Origin,
} from '#test/gateway.ts';
import type { RunningGateway } from '../../../../gateway/src/server.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';

const CHROMIUM = '/usr/bin/chromium';
// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);
const STRONG = 'velvet Anchor tiptoe 93 marmalade';
const SHOTS = process.env.PROXYFLEET_DASHBOARD_SCREENSHOTS;
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`SKIPPED: dashboard browser tests need ${CHROMIUM} (.ci/run installs it)`);
const maybe = haveChromium || process.env.CI === 'true' ? describe : describe.skip;

let db: TestDatabase;
let api: TestApi;
let gateway: RunningGateway;
let origin: Origin;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let account: { id: string; email: string; apiKey: string; proxyUsername: string };
const seenUrls: string[] = [];
/** Every log line the API wrote, at debug level: checked for secrets at the end. */
const logLines: string[] = [];
const secrets: string[] = [];

const admin = (p: string, o: { method?: string; body?: unknown } = {}) =>
  call(api.url, `/admin/v1${p}`, { admin: TEST_ADMIN_TOKEN, ...o });

async function axe(p: Page, name: string): Promise<void> {
  const result = await new AxeBuilder({ page: p }).analyze();
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect({
    page: name,
    violations: bad.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
  }).toEqual({ page: name, violations: [] });
}

async function shot(p: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await p.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

async function newContext(viewport = { width: 1280, height: 900 }): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport, acceptDownloads: true });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: api.url });
  // A bound, not a measurement: scrypt sign-ins on a loaded 2-core machine take seconds.
  ctx.setDefaultTimeout(30_000);
  return ctx;
}

async function signIn(p: Page, email: string, password: string): Promise<void> {
  await p.goto(`${api.url}/sign-in`);
  await p.getByLabel('Email').fill(email);
  await p.getByLabel('Password').fill(password);
  await p.getByRole('button', { name: 'Sign in' }).click();
}

/** A proxy line host:port:user:pass used for one plain-HTTP request through the gateway. */
async function throughGateway(line: string): Promise<number> {
  const [host, port, user, ...rest] = line.split(':');
  expect(host).toBe('127.0.0.1');
  const [answer] = (
    await rawExchange(Number(port), [
      get(`http://127.0.0.1:${origin.port}/bytes/200000`, basicAuth(user!, rest.join(':'))),
    ])
  ).responses;
  return answer!.status;
}

/** The same download through the same gateway as SOCKS5, by curl: the HTTP status curl got. */
async function throughGatewaySocks(line: string): Promise<string> {
  const [host, port, user, ...rest] = line.split(':');
  const { execFile } = await import('node:child_process');
  return new Promise((resolve) => {
    execFile(
      'curl',
      [
        '--silent',
        '--max-time',
        '20',
        '--socks5-hostname',
        `${host}:${port}`,
        '--proxy-user',
        `${user}:${rest.join(':')}`,
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        `http://127.0.0.1:${origin.port}/bytes/200000`,
      ],
      (_err, stdout) => resolve(stdout),
    );
  });
}

/** The signed-out forms' CSRF token and pre-session cookie, as a plain HTTP client gets them. */
async function signedOutForm(
  headers: Record<string, string> = {},
): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${api.url}/sign-in`, { headers });
  const cookie = res.headers
    .getSetCookie()
    .find((c) => c.startsWith('pf_pre='))!
    .split(';')[0]!;
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await res.text())![1]!;
  return { cookie, csrf };
}

async function postForm(
  pathName: string,
  fields: Record<string, string>,
  cookie: string,
  headers: Record<string, string> = {},
) {
  return fetch(`${api.url}${pathName}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, ...headers },
    body: new URLSearchParams(fields).toString(),
  });
}

maybe('customer dashboard in Chromium', () => {
  beforeAll(async () => {
    db = await createTestDatabase();
    // One trusted proxy hop: the throttling test sends X-Forwarded-For to act from other addresses.
    api = await startTestApi(db, {
      env: { PROXYFLEET_API_TRUST_PROXY_HOPS: '1' },
      logLevel: 'debug',
      logStream: new Writable({
        write(chunk: Buffer, _enc, done) {
          logLines.push(chunk.toString());
          done();
        },
      }),
    });
    origin = await startOrigin();
    gateway = await startTestGateway(db.pool, db.url, gatewaySpec('basic'));
    await upsertGatewayEndpoint(db.pool, { plan: 'basic', host: '127.0.0.1', port: gateway.port }, 'test');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    context = await newContext();
    page = await context.newPage();
    page.on('request', (r) => seenUrls.push(r.url()));
    const created = await admin('/accounts', { body: { email: exampleEmail('dash') } });
    expect(created.status).toBe(201);
    account = created.body as typeof account;
    secrets.push(account.apiKey, STRONG);
    expect(
      (await admin(`/accounts/${account.id}/purchases`, { body: { product: 'basic', gb: 1 } })).status,
    ).toBe(201);
    expect(
      (
        await admin(`/accounts/${account.id}/auto-refill/basic`, {
          method: 'PUT',
          body: { enabled: true, thresholdGb: 0.5, refillGb: 2, maxRefillsPerMonth: 3 },
        })
      ).status,
    ).toBe(200);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.close();
    await origin?.close();
    await api?.close();
    await db?.drop();
  });

  it('serves the sign-in page at / when signed out, with a strict CSP and no third-party origin', async () => {
    const res = await page.goto(`${api.url}/`);
    expect(res!.status()).toBe(200);
    await expect(page.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    await expect(page.getByRole('link', { name: 'Forgot password?' }).isVisible()).resolves.toBe(true);
    const csp = res!.headers()['content-security-policy']!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(res!.headers()['x-frame-options']).toBe('SAMEORIGIN');
    await axe(page, 'sign-in');
    await shot(page, 'sign-in');
  });

  let inviteUrl: string;
  it('invites through the admin API: 201 {url, expiresAt}, and the link is emailed through the outbox', async () => {
    const res = await admin(`/accounts/${account.id}/dashboard-invite`, { method: 'POST' });
    expect(res.status).toBe(201);
    const body = res.body as { url: string; expiresAt: string };
    expect(body.url).toMatch(new RegExp(`^${api.url}/set-password\\?token=[A-Za-z0-9_-]{43}$`));
    expect(Date.parse(body.expiresAt)).toBeGreaterThan(Date.now() + 6 * 24 * 3600_000);
    inviteUrl = body.url;
    secrets.push(new URL(inviteUrl).searchParams.get('token')!);
    const { rows } = await db.pool.query<{ to_address: string; body_text: string }>(
      `SELECT to_address, body_text FROM email_outbox WHERE account_id = $1 AND kind = 'dashboard_invite'`,
      [account.id],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.to_address).toBe(account.email);
    expect(rows[0]!.body_text).toContain(inviteUrl);
    expect(
      (await admin('/accounts/00000000-0000-4000-8000-000000000000/dashboard-invite', { method: 'POST' }))
        .status,
    ).toBe(404);
  });

  it('sets the password through the link: short and weak passwords refused, then the link works once', async () => {
    await page.goto(inviteUrl);
    await axe(page, 'set-password');
    await shot(page, 'set-password');
    await page.getByLabel('New password').fill('short');
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('at least 10 characters');
    await page.getByLabel('New password').fill('password1234');
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('too easy to guess');
    await page.getByLabel('New password').fill(STRONG);
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.waitForURL(`${api.url}/sign-in?done=password`);
    await expect(page.getByRole('status').filter({ hasText: 'password is set' }).isVisible()).resolves.toBe(
      true,
    );
    const again = await page.goto(inviteUrl);
    expect(again!.status()).toBe(410);
    await expect(page.getByRole('heading', { name: 'This link does not work' }).isVisible()).resolves.toBe(
      true,
    );
  });

  it('refuses a wrong password without saying which field was wrong', async () => {
    await signIn(page, account.email, 'not the password at all');
    const text = await page.getByRole('alert').textContent();
    expect(text).toBe('The email or password is not right.');
    await signIn(page, 'nobody-' + account.email, STRONG);
    await expect(page.getByRole('alert').textContent()).resolves.toBe(text);
  });

  let sessionCookie: string;
  it('signs in; the session cookie is HttpOnly and SameSite=Lax; navigation and every page pass axe', async () => {
    await signIn(page, account.email, STRONG);
    await page.waitForURL(`${api.url}/`);
    const cookie = (await context.cookies()).find((c) => c.name === 'pf_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', secure: false });
    sessionCookie = cookie.value;
    const nav = [
      ['Overview', '/'],
      ['Proxies', '/proxies'],
      ['Sub-users', '/sub-users'],
      ['API keys', '/keys'],
      ['Alerts', '/alerts'],
      ['Billing', '/billing'],
    ] as const;
    for (const [name, href] of [...nav.slice(1), nav[0]]) {
      await page.getByRole('navigation').getByRole('link', { name, exact: true }).click();
      await page.waitForURL(api.url + href);
      await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe(name);
      await axe(page, name);
    }
    await expect(page.getByRole('button', { name: 'Sign out' }).isVisible()).resolves.toBe(true);
  });

  it('Proxies: reveals the password, generates what the API generates, and the generated proxy works through a gateway', async () => {
    await page.goto(`${api.url}/proxies`);
    const password = page.getByLabel('Proxy password', { exact: true });
    await expect(password.getAttribute('type')).resolves.toBe('password');
    await page.getByRole('button', { name: 'Reveal' }).click();
    await expect(password.getAttribute('type')).resolves.toBe('text');
    const proxyPassword = await password.inputValue();
    secrets.push(proxyPassword);
    await expect(page.getByLabel('Proxy username', { exact: true }).inputValue()).resolves.toBe(
      account.proxyUsername,
    );

    await page.getByLabel('Product', { exact: true }).selectOption('basic');
    await page.getByLabel('Country', { exact: true }).fill('US');
    await page.getByLabel('Session type', { exact: true }).selectOption('sticky');
    await page.getByLabel('Count', { exact: true }).fill('3');
    await page.getByRole('button', { name: 'Generate' }).click();
    const lines = (await page.getByLabel('Generated proxies').inputValue()).split('\n');
    expect(lines).toHaveLength(3);
    const fromApi = await call(api.url, '/api/v1/proxies/generate', {
      key: account.apiKey,
      body: { provider: 'basic', country: 'US', sessionType: 'sticky', count: 3 },
    });
    expect(fromApi.status).toBe(200);
    // Same format from the same code path; only the random sticky session ids differ.
    const shape = (l: string) => l.replace(/session-[a-z0-9]+/, 'session-X');
    expect(lines.map(shape)).toEqual((fromApi.body as { proxies: string[] }).proxies.map(shape));
    expect(lines[0]).toContain(`127.0.0.1:${gateway.port}:`);
    expect(lines[0]).toContain(proxyPassword);
    await axe(page, 'proxies with generated list');
    await shot(page, 'proxies');

    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download .txt' }).click();
    const file = await download;
    expect(file.suggestedFilename()).toBe('proxies-basic.txt');
    expect(readFileSync(await file.path(), 'utf8')).toBe(lines.join('\n') + '\n');

    expect(await throughGateway(lines[0]!)).toBe(200);
    // A named target for the Overview's Top targets table (its query must never be shown or stored).
    const [, , targetUser, ...targetPass] = lines[0]!.split(':');
    const named = await rawExchange(gateway.port, [
      get(
        `http://shop.example.localhost:${origin.port}/bytes/1000?q=secret-query`,
        basicAuth(targetUser!, targetPass.join(':')),
      ),
    ]);
    expect(named.responses[0]!.status).toBe(200);
    // The SOCKS5 form the page shows, with the same generated credentials, through the same port.
    await expect(page.locator('#proxy-url-forms').textContent()).resolves.toContain(
      'socks5h://username:password@host:port',
    );
    expect(await throughGatewaySocks(lines[0]!)).toBe('200');

    // The account's ISP proxies: in the table with the password masked, and in full in the copy
    // field, exactly as GET /api/v1/proxies/list gives them.
    const isp = await admin(`/accounts/${account.id}/isp-proxies`, {
      method: 'POST',
      body: { host: '192.0.2.10', port: 8080, username: 'isp-user', country: 'us', password: 'isp-secret-1' },
    });
    expect(isp.status).toBe(201);
    secrets.push('isp-secret-1');
    await page.goto(`${api.url}/proxies`);
    const ispRow = page
      .getByRole('region', { name: 'ISP proxies' })
      .getByRole('row', { name: /192\.0\.2\.10/ });
    await expect(ispRow.textContent()).resolves.toContain('192.0.2.10:8080:isp-user:••••••');
    await expect(ispRow.textContent()).resolves.not.toContain('isp-secret-1');
    const listed = await call(api.url, '/api/v1/proxies/list', { key: account.apiKey });
    expect(await page.getByLabel('ISP proxies as text').inputValue()).toBe(
      (listed.body as { proxies: { proxy: string }[] }).proxies.map((x) => x.proxy).join('\n'),
    );
    await axe(page, 'proxies with an ISP proxy');

    // The IP allowlist (docs/adr/0036): a loopback address refused with the API's message (this API
    // runs with private ranges refused, as production does), a public one added and removed.
    await page.getByLabel('Product to allow').selectOption('basic');
    await page.getByLabel('Address or range').fill('127.0.0.1');
    await page.getByRole('button', { name: 'Add to allowlist' }).click();
    await expect(page.getByRole('alert').first().textContent()).resolves.toContain(
      'Address or range: must be a public address',
    );
    await page.getByLabel('Address or range').fill('192.0.2.77');
    await page.getByLabel('Targeting (optional)').fill('country-us_session-abc1');
    await page.getByRole('button', { name: 'Add to allowlist' }).click();
    await page.waitForURL(`${api.url}/proxies?done=allowlist-added`);
    const allowRow = page
      .getByRole('region', { name: 'IP allowlist' })
      .getByRole('row', { name: /192\.0\.2\.77/ });
    await expect(allowRow.textContent()).resolves.toContain('country-us_session-abc1');
    const viaApi = await call(api.url, '/api/v1/ip-allowlist', { key: account.apiKey });
    expect((viaApi.body as { entries: { cidr: string }[] }).entries.map((e) => e.cidr)).toEqual([
      '192.0.2.77/32',
    ]);
    await axe(page, 'proxies with an allowlist entry');
    await page.getByRole('button', { name: 'Remove 192.0.2.77/32 (basic)' }).click();
    await page.waitForURL(`${api.url}/proxies?done=allowlist-removed`);
    await expect(page.getByText('No allowlisted addresses.').isVisible()).resolves.toBe(true);

    // The gateway's usage batches, folded as the worker does, feed the Overview's chart.
    await until(async () => {
      await gateway.ledger.flush();
      await gateway.targets.drain();
      await fold(db.pool);
      const { rows } = await db.pool.query<{ n: number }>(
        'SELECT coalesce(sum(bytes_up + bytes_down), 0)::bigint AS n FROM usage_hourly WHERE account_id = $1',
        [account.id],
      );
      return (rows[0]?.n ?? 0) > 100_000;
    }, 'usage folded into the hourly roll-up');
  });

  it('Overview: bandwidth per product, its speed cap, and the usage chart from what the gateway wrote', async () => {
    await db.pool.query(
      `INSERT INTO account_throttles (account_id, product, bytes_per_second) VALUES ($1, 'basic', 1048576)`,
      [account.id],
    );
    await page.goto(`${api.url}/`);
    const row = page
      .getByRole('table', { name: 'Bandwidth per product' })
      .getByRole('row', { name: /basic/ });
    await expect(row.textContent()).resolves.toContain('1 GB');
    await expect(row.textContent()).resolves.toContain('1.05 MB/s');
    const chart = page.getByRole('img', { name: /usage/i });
    await chart.waitFor();
    await expect(page.locator('#usage-chart canvas').getAttribute('role')).resolves.toBe('img');
    const data = JSON.parse((await page.locator('#usage-data').textContent())!) as {
      products: string[];
      series: number[][];
    };
    expect(data.products).toEqual(['basic']);
    expect(data.series[0]!.at(-1)).toBeGreaterThan(0);
    const target = page
      .getByRole('table', { name: /Top targets/ })
      .getByRole('row', { name: /example\.localhost/ });
    await expect(target.textContent()).resolves.toContain('basic');
    await expect(
      page.getByRole('region', { name: 'Top targets', exact: true }).textContent(),
    ).resolves.not.toMatch(/secret-query|shop\./);
    await axe(page, 'overview with chart');
    await shot(page, 'overview');
  });

  it('API keys: regenerate the primary key (old 401, new 200 at once), create and revoke a named key', async () => {
    await page.goto(`${api.url}/keys`);
    const oldKey = account.apiKey;
    await expect(page.getByText(`${oldKey.slice(0, 15)}…${oldKey.slice(-4)}`).isVisible()).resolves.toBe(
      true,
    );
    expect(await page.content()).not.toContain(oldKey);
    expect((await call(api.url, '/api/v1/usage', { key: oldKey })).status).toBe(200);

    await page.getByRole('button', { name: 'Regenerate primary key' }).click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.isVisible()).resolves.toBe(true);
    await axe(page, 'regenerate dialog');
    await dialog.getByRole('button', { name: 'Regenerate' }).click();
    const newKey = await page.getByLabel('New API key').inputValue();
    secrets.push(newKey);
    expect(newKey).toMatch(/^svc_live_[0-9a-f]{48}$/);
    expect(await page.getByLabel('New API key').getAttribute('readonly')).not.toBeNull();
    await expect(page.getByRole('button', { name: 'Copy' }).isVisible()).resolves.toBe(true);
    expect((await call(api.url, '/api/v1/usage', { key: oldKey })).status).toBe(401);
    expect((await call(api.url, '/api/v1/usage', { key: newKey })).status).toBe(200);
    await page.getByRole('button', { name: 'Copy' }).click();
    await expect(page.evaluate<string>('navigator.clipboard.readText()')).resolves.toBe(newKey);
    account.apiKey = newKey;

    await page.getByLabel('Key name').fill('<script>');
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('Key name: must be letters');
    await page.getByLabel('Key name').fill('ci deploy');
    await page.getByRole('button', { name: 'Create key' }).click();
    const named = await page.getByLabel('New API key').inputValue();
    secrets.push(named);
    expect(named).toMatch(/^svc_live_[0-9a-f]{48}$/);
    expect((await call(api.url, '/api/v1/usage', { key: named })).status).toBe(200);
    const row = page.getByRole('row', { name: /ci deploy/ });
    await expect(row.textContent()).resolves.toContain(`${named.slice(0, 15)}…${named.slice(-4)}`);
    await axe(page, 'keys with new key');
    await shot(page, 'api-keys');
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.waitForURL(`${api.url}/keys?done=revoked`);
    expect((await call(api.url, '/api/v1/usage', { key: named })).status).toBe(401);
    await expect(page.getByRole('row', { name: /ci deploy/ }).count()).resolves.toBe(0);
  });

  it('Sub-users: create (a refused form keeps what was typed), credentials copied, proxies generated for it, suspend, new password, edit limits, delete', async () => {
    type Sub = {
      id: string;
      name: string;
      username: string;
      password: string;
      status: string;
      maxConnections: number | null;
      products: Record<string, { limitGb: number | null }>;
    };
    const viaApi = async () =>
      (await call(api.url, '/api/v1/sub-users', { key: account.apiKey })).body.subUsers as Sub[];
    await page.getByRole('navigation').getByRole('link', { name: 'Sub-users', exact: true }).click();
    await page.waitForURL(`${api.url}/sub-users`);
    await expect(page.getByText('No sub-users yet.').isVisible()).resolves.toBe(true);

    await page.getByLabel('Name', { exact: true }).fill('Team A!');
    await page.getByLabel('basic limit (GB)').fill('0.5');
    await page.getByRole('button', { name: 'Create sub-user' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('Name: must be 1 to 64 letters');
    await expect(page.getByLabel('basic limit (GB)').inputValue()).resolves.toBe('0.5');
    await page.getByLabel('Name', { exact: true }).fill('Team A');
    await page.getByLabel('Connection cap (optional)').fill('5');
    await page.getByRole('button', { name: 'Create sub-user' }).click();
    await page.waitForURL(`${api.url}/sub-users?done=created`);
    const [created] = await viaApi();
    expect(created).toMatchObject({ name: 'Team A', status: 'active', maxConnections: 5 });
    expect(created!.products.basic!.limitGb).toBe(0.5);
    secrets.push(created!.password);
    const row = page.getByRole('region', { name: 'Sub-users' }).getByRole('row', { name: /Team A/ });
    await expect(row.textContent()).resolves.toMatch(/active[\s\S]*basic: 0\s+of 0\.5 GB[\s\S]*5/);
    await axe(page, 'sub-users');
    await shot(page, 'sub-users');
    await row.getByRole('button', { name: 'Copy the credentials of Team A' }).click();
    await expect(page.evaluate<string>('navigator.clipboard.readText()')).resolves.toBe(
      `${created!.username}:${created!.password}`,
    );

    // The Proxies page generates strings with the sub-user's username and password.
    await page.goto(`${api.url}/proxies`);
    await page.getByLabel('Generate for').selectOption({ label: 'Sub-user Team A' });
    await page.getByRole('button', { name: 'Generate' }).click();
    await expect(page.getByLabel('Generated proxies').inputValue()).resolves.toMatch(
      new RegExp(`^127\\.0\\.0\\.1:${gateway.port}:${created!.username}:${created!.password}_country-us$`),
    );

    // Its traffic through the gateway, and the Overview's Top targets for it alone (docs/adr/0037).
    const subLine = await page.getByLabel('Generated proxies').inputValue();
    const [, , subName, ...subPass] = subLine.split('\n')[0]!.split(':');
    // The gateway knows the sub-user once it has applied its creation, not after some page loads.
    await cacheSynced(db.pool, [gateway]);
    const sent = await rawExchange(gateway.port, [
      get(`http://team.example.localhost:${origin.port}/bytes/1000`, basicAuth(subName!, subPass.join(':'))),
    ]);
    expect(sent.responses[0]!.status).toBe(200);
    await gateway.ledger.flush();
    await gateway.targets.drain();
    await page.goto(`${api.url}/`);
    await page.getByLabel('Sent by').selectOption({ label: 'Sub-user Team A' });
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL(new RegExp(`subUser=${created!.id}`));
    type Target = { domain: string; bytes: number };
    const domainBytes = async (query: string) =>
      (
        (await call(api.url, `/api/v1/usage/targets${query}`, { key: account.apiKey })).body as {
          targets: Target[];
        }
      ).targets.find((t) => t.domain === 'example.localhost')!.bytes;
    const own = await domainBytes(`?subUser=${created!.id}`);
    // The Proxies test sent its own traffic to the same domain with the account's credentials.
    expect(own).toBeLessThan(await domainBytes(''));
    const targetRow = page
      .getByRole('table', { name: /Top targets/ })
      .getByRole('row', { name: /example\.localhost/ });
    await expect(targetRow.textContent()).resolves.toContain(own.toLocaleString('en-US'));
    await axe(page, 'overview for one sub-user');

    await page.goto(`${api.url}/sub-users`);
    await row.getByRole('button', { name: 'Suspend Team A' }).click();
    await page.waitForURL(`${api.url}/sub-users?done=suspended`);
    expect((await viaApi())[0]!.status).toBe('suspended');
    await expect(row.textContent()).resolves.toContain('suspended');

    await row.getByRole('button', { name: 'New password' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Issue new password' }).click();
    await page.waitForURL(`${api.url}/sub-users?done=password`);
    const renewed = (await viaApi())[0]!;
    secrets.push(renewed.password);
    expect(renewed.password).not.toBe(created!.password);

    await row.getByRole('link', { name: 'Edit Team A' }).click();
    await page.waitForURL(`${api.url}/sub-users/${created!.id}`);
    await expect(page.getByLabel('basic limit (GB)').inputValue()).resolves.toBe('0.5');
    await axe(page, 'sub-user edit');
    await page.getByLabel('basic limit (GB)').fill('');
    await page.getByLabel('mobile limit (GB)').fill('2');
    await page.getByLabel('Connection cap (optional)').fill('');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${api.url}/sub-users?done=saved`);
    const edited = (await viaApi())[0]!;
    expect(edited.products.basic!.limitGb).toBeNull();
    expect(edited.products.mobile!.limitGb).toBe(2);
    expect(edited.maxConnections).toBeNull();

    await row.getByRole('button', { name: 'Delete' }).click();
    await expect(page.getByRole('dialog').textContent()).resolves.toContain('This cannot be undone');
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await page.waitForURL(`${api.url}/sub-users?done=deleted`);
    await expect(page.getByText('No sub-users yet.').isVisible()).resolves.toBe(true);
    expect(await viaApi()).toEqual([]);
  });

  it('Alerts: the settings the admin API shows, saved', async () => {
    await page.goto(`${api.url}/alerts`);
    await expect(page.getByLabel('Low bandwidth').isChecked()).resolves.toBe(true);
    await expect(page.getByLabel('Server alerts').isChecked()).resolves.toBe(false);
    await page.getByLabel('Low bandwidth').uncheck();
    await page.getByLabel('Server alerts').check();
    await page.getByLabel('Low-bandwidth threshold (% remaining)').fill('25');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${api.url}/alerts?done=saved`);
    const view = await admin(`/accounts/${account.id}`);
    expect((view.body as { alerts: unknown }).alerts).toEqual({
      lowBandwidth: false,
      newInvoice: true,
      serverAlerts: true,
      lowBandwidthPercent: 25,
    });
    await axe(page, 'alerts saved');
    await shot(page, 'alerts');

    // Opting out of target statistics deletes them; the Overview says they are off.
    await expect(page.getByLabel('Record target statistics').isChecked()).resolves.toBe(true);
    await page.getByLabel('Record target statistics').uncheck();
    await page.getByRole('button', { name: 'Update privacy setting' }).click();
    await page.waitForURL(`${api.url}/alerts?done=privacy`);
    await expect(page.getByLabel('Record target statistics').isChecked()).resolves.toBe(false);
    const targets = await admin(`/accounts/${account.id}/usage/targets`);
    expect(targets.body).toMatchObject({ enabled: false, targets: [] });
    await page.goto(`${api.url}/`);
    await page.getByText('Target statistics are off for this account').waitFor();
  });

  it('Billing: the invoices and the auto-refill settings per product', async () => {
    await page.goto(`${api.url}/billing`);
    const { rows } = await db.pool.query<{ number: number }>(
      'SELECT number FROM invoices WHERE account_id = $1',
      [account.id],
    );
    await expect(
      page.getByRole('row', { name: new RegExp(`#${rows[0]!.number}`) }).textContent(),
    ).resolves.toContain('1 GB');
    const basic = page.getByRole('row', { name: /^basic/ });
    await expect(basic.textContent()).resolves.toMatch(/On\s+0\.5 GB\s+2 GB\s+3/);
    await shot(page, 'billing');
  });

  it('Billing: auto-refill is changed in a form; a refused form keeps what was typed', async () => {
    await page.goto(`${api.url}/billing`);
    await page.getByRole('link', { name: 'Change auto-refill of basic' }).click();
    await page.waitForURL(`${api.url}/billing/auto-refill/basic`);
    await expect(page.getByLabel('Auto-refill basic').isChecked()).resolves.toBe(true);
    await expect(page.getByLabel('When below (GB)').inputValue()).resolves.toBe('0.5');
    await expect(page.getByLabel('Buy (GB)').inputValue()).resolves.toBe('2');
    await expect(page.getByLabel('At most per month').inputValue()).resolves.toBe('3');
    await axe(page, 'auto-refill form');

    // The API's own rule (threshold below the refill amount), named by the form's labels.
    await page.getByLabel('When below (GB)').fill('3');
    const refused = page.waitForResponse((r) => r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Save' }).click();
    expect((await refused).status()).toBe(422);
    await expect(page.getByRole('alert').textContent()).resolves.toContain(
      'When below (GB): must be less than Buy (GB).',
    );
    await expect(page.getByLabel('When below (GB)').inputValue()).resolves.toBe('3');
    const unchanged = await call(api.url, '/api/v1/auto-refill/basic', { key: account.apiKey });
    expect(unchanged.body).toMatchObject({
      enabled: true,
      thresholdGb: 0.5,
      refillGb: 2,
      maxRefillsPerMonth: 3,
    });

    await page.getByLabel('When below (GB)').fill('1');
    await page.getByLabel('Buy (GB)').fill('4.5');
    await page.getByLabel('At most per month').fill('2');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${api.url}/billing?done=refill`);
    await expect(page.getByRole('status').filter({ hasText: 'Auto-refill saved.' }).count()).resolves.toBe(1);
    await expect(page.getByRole('row', { name: /^basic/ }).textContent()).resolves.toMatch(
      /On\s+1 GB\s+4\.5 GB\s+2/,
    );
    const saved = await call(api.url, '/api/v1/auto-refill/basic', { key: account.apiKey });
    expect(saved.body).toMatchObject({ enabled: true, thresholdGb: 1, refillGb: 4.5, maxRefillsPerMonth: 2 });

    // Turned off for a product: kept, but off; an unknown product is a 404 on the Billing page.
    await page.goto(`${api.url}/billing/auto-refill/basic`);
    await page.getByLabel('Auto-refill basic').uncheck();
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${api.url}/billing?done=refill`);
    await expect(page.getByRole('row', { name: /^basic/ }).textContent()).resolves.toMatch(/Off\s+1 GB/);
    const unknown = await page.goto(`${api.url}/billing/auto-refill/premium`);
    expect(unknown?.status()).toBe(404);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('There is no such product.');
  });

  it('refuses a state-changing request without a valid CSRF token (403)', async () => {
    const cookie = `pf_session=${sessionCookie}`;
    const missing = await postForm('/alerts', { lowBandwidthPercent: '50' }, cookie);
    expect(missing.status).toBe(403);
    const forged = await postForm('/keys/regenerate', { _csrf: 'x'.repeat(43) }, cookie);
    expect(forged.status).toBe(403);
    const view = await admin(`/accounts/${account.id}`);
    expect((view.body as { alerts: { lowBandwidthPercent: number } }).alerts.lowBandwidthPercent).toBe(25);
    expect((await call(api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(200);
    // Signed-out forms too: a sign-in without the pre-session cookie's token is refused.
    expect((await postForm('/sign-in', { email: account.email, password: STRONG }, '')).status).toBe(403);
  });

  it('resets the proxy password after confirmation; the old one stops working on the gateway', async () => {
    await page.goto(`${api.url}/proxies`);
    await page.getByRole('button', { name: 'Reveal' }).click();
    const before = await page.getByLabel('Proxy password', { exact: true }).inputValue();
    await page.getByRole('button', { name: 'Reset proxy password' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Reset password' }).click();
    await page.waitForURL(`${api.url}/proxies?done=password`);
    await page.getByRole('button', { name: 'Reveal' }).click();
    const after = await page.getByLabel('Proxy password', { exact: true }).inputValue();
    expect(after).not.toBe(before);
    // The basic plan's grammar: targeting after the password (password_country-us).
    const line = `127.0.0.1:${gateway.port}:${account.proxyUsername}`;
    await until(
      async () => (await throughGateway(`${line}:${before}_country-us`)) === 407,
      'old proxy password refused by the gateway',
    );
    await until(
      async () => (await throughGateway(`${line}:${after}_country-us`)) === 200,
      'new proxy password accepted by the gateway',
    );
  });

  it('every asset came from the API process itself', () => {
    expect(seenUrls.length).toBeGreaterThan(0);
    expect(
      seenUrls.filter((u) => !u.startsWith(api.url) && !u.startsWith('blob:') && !u.startsWith('data:')),
    ).toEqual([]);
    expect(seenUrls.some((u) => /\/assets\/uplot\.[0-9a-f]{12}\.js$/.test(u))).toBe(true);
  });

  it('works 375 px wide: every page fits and passes axe', async () => {
    const narrow = await newContext({ width: 375, height: 800 });
    const p = await narrow.newPage();
    await signIn(p, account.email, STRONG);
    await p.waitForURL(`${api.url}/`);
    for (const [href, name] of [
      ['/', 'overview'],
      ['/proxies', 'proxies'],
      ['/sub-users', 'sub-users'],
      ['/keys', 'api-keys'],
      ['/alerts', 'alerts'],
      ['/billing', 'billing'],
      ['/billing/auto-refill/basic', 'auto-refill'],
    ] as const) {
      await p.goto(api.url + href);
      await axe(p, `${name} at 375 px`);
      const width = await p.evaluate<number>('document.documentElement.scrollWidth');
      expect({ href, width }).toEqual({ href, width: 375 });
      await shot(p, `${name}-375`);
    }
    await narrow.close();
  });

  it('signing out ends the session on the server', async () => {
    await page.goto(`${api.url}/`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${api.url}/sign-in`);
    const { rows } = await db.pool.query('SELECT 1 FROM dashboard_sessions WHERE token_hash = $1', [
      sha256(sessionCookie),
    ]);
    expect(rows).toHaveLength(0);
    // The old cookie, replayed by a plain client, no longer opens anything.
    const res = await fetch(`${api.url}/keys`, {
      redirect: 'manual',
      headers: { cookie: `pf_session=${sessionCookie}` },
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/sign-in');
  });

  it('"Forgot password?" answers the same for known and unknown emails and emails a reset link', async () => {
    for (const email of [account.email, exampleEmail('nobody')]) {
      await page.goto(`${api.url}/sign-in`);
      await page.getByRole('link', { name: 'Forgot password?' }).click();
      await page.getByLabel('Email').fill(email);
      await page.getByRole('button', { name: 'Send reset link' }).click();
      await expect(
        page.getByRole('status').filter({ hasText: 'If an account exists' }).isVisible(),
      ).resolves.toBe(true);
    }
    await axe(page, 'forgot password sent');
    const { rows } = await db.pool.query<{ body_text: string }>(
      `SELECT body_text FROM email_outbox WHERE kind = 'dashboard_reset'`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.body_text).toContain(account.email === rows[0]!.body_text ? '' : '/set-password?token=');
  });

  it('throttles failed sign-ins per account and per address', async () => {
    const form = await signedOutForm();
    for (let i = 0; i < 5; i++) {
      const res = await postForm(
        '/sign-in',
        { _csrf: form.csrf, email: account.email, password: `wrong ${i}` },
        form.cookie,
      );
      expect(res.status).toBe(401);
    }
    const locked = await postForm(
      '/sign-in',
      { _csrf: form.csrf, email: account.email, password: STRONG },
      form.cookie,
    );
    expect(locked.status).toBe(429);
    expect(await locked.text()).toContain('Too many failed sign-in attempts');
    await db.pool.query('DELETE FROM dashboard_login_failures');

    const from = { 'x-forwarded-for': '198.51.100.7' };
    const other = await signedOutForm(from);
    for (let i = 0; i < 20; i++) {
      const res = await postForm(
        '/sign-in',
        { _csrf: other.csrf, email: exampleEmail('guess'), password: 'guess' },
        other.cookie,
        from,
      );
      expect(res.status).toBe(401);
    }
    const blocked = await postForm(
      '/sign-in',
      { _csrf: other.csrf, email: account.email, password: STRONG },
      other.cookie,
      from,
    );
    expect(blocked.status).toBe(429);
    // Another address is not affected.
    const ok = await postForm(
      '/sign-in',
      { _csrf: form.csrf, email: account.email, password: STRONG },
      form.cookie,
    );
    expect(ok.status).toBe(303);
  }, 180_000);

  it('a suspended account cannot sign in, and its open sessions stop working', async () => {
    const p = await context.newPage();
    await signIn(p, account.email, STRONG);
    await p.waitForURL(`${api.url}/`);
    expect((await admin(`/accounts/${account.id}/suspend`, { method: 'POST' })).status).toBe(200);
    await p.goto(`${api.url}/keys`);
    await expect(p.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    await signIn(p, account.email, STRONG);
    await expect(p.getByRole('alert').textContent()).resolves.toContain('suspended');
    await p.close();
  });

  it('never wrote a key, password or link token to the log', () => {
    expect(logLines.length).toBeGreaterThan(10);
    const log = logLines.join('');
    expect(secrets.filter((secret) => log.includes(secret))).toEqual([]);
  });

  it('over HTTPS (behind a TLS-terminating proxy) cookies are Secure with the __Host- prefix', async () => {
    const https = await startTestApi(db, { env: { PROXYFLEET_DASHBOARD_HTTPS: 'true' } });
    try {
      const res = await fetch(`${https.url}/sign-in`);
      const cookie = res.headers.getSetCookie().find((c) => c.startsWith('__Host-pf_pre='))!;
      expect(cookie).toMatch(/; Path=\//);
      expect(cookie).toMatch(/; HttpOnly/);
      expect(cookie).toMatch(/; Secure/);
      expect(cookie).toMatch(/; SameSite=Lax/);
      expect(cookie).not.toMatch(/Domain=/);
      expect(res.headers.get('strict-transport-security')).toContain('max-age=31536000');
    } finally {
      await https.close();
    }
  });
});
