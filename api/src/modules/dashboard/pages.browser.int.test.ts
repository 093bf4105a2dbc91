// The dashboard's pages in a real Chromium, against the real API, database and a real gateway,
// signed in as a customer is (invited, password set through the link): every page with an axe-core
// check, proxies generated and used through the gateway (HTTP and SOCKS5), the ISP proxies and the
// IP allowlist, the Overview's chart and Top targets, sub-users, billing, CSRF, a proxy password
// reset, assets from the API process only, a 375-px-wide run, and no secret in the log. Signing in
// and out is in sign-in.browser.int.test.ts, Settings (keys and alerts) in settings.browser.int.test.ts.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { upsertGatewayEndpoint } from '#common/gateway-endpoints.ts';
import { call, type CallOptions, type TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
  newContext,
  postForm,
  proxyLineSocksStatus,
  proxyLineStatus,
  shot,
  signIn,
  startDashboardRun,
  STRONG,
  type DashboardRun,
} from '#test/dashboard.ts';
import type { TestDatabase } from '#test/db.ts';
import { exampleEmail } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, startTestGateway } from '#test/gateway/fixture.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { basicAuth, rawExchange, get } from '#test/gateway/client.ts';
import { fold } from '#test/gateway/usage.ts';
import { until } from '#test/process.ts';
import type { RunningGateway } from '../../../../gateway/src/server.ts';

// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

let run: DashboardRun;
let db: TestDatabase;
let api: TestApi;
let browser: Browser;
let page: Page;
let gateway: RunningGateway;
let origin: Origin;
let account: { id: string; email: string; apiKey: string; proxyUsername: string };
let sessionCookie: string;
const secrets: string[] = [];

const admin = (p: string, o: CallOptions = {}) => adminCall(api, p, o);

/** One download through the gateway with a generated proxy line, over HTTP and over SOCKS5. */
const throughGateway = (line: string) =>
  proxyLineStatus(line, `http://127.0.0.1:${origin.port}/bytes/200000`);
const throughGatewaySocks = (line: string) =>
  proxyLineSocksStatus(line, `http://127.0.0.1:${origin.port}/bytes/200000`);

describeInChromium('customer dashboard in Chromium: the pages', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ db, api, browser, page } = run);
    origin = await startOrigin();
    gateway = await startTestGateway(db.pool, db.url, gatewaySpec('basic'));
    await upsertGatewayEndpoint(db.pool, { plan: 'basic', host: '127.0.0.1', port: gateway.port }, 'test');
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
    // Signed in as a customer is: invited, the password set through the link.
    const invite = await admin(`/accounts/${account.id}/dashboard-invite`, { method: 'POST' });
    expect(invite.status).toBe(201);
    const inviteUrl = (invite.body as { url: string }).url;
    secrets.push(new URL(inviteUrl).searchParams.get('token')!);
    await page.goto(inviteUrl);
    await page.getByLabel('New password').fill(STRONG);
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.waitForURL(`${api.url}/sign-in?done=password`);
    await signIn(page, account.email, STRONG);
    await page.waitForURL(`${api.url}/`);
    sessionCookie = (await run.context.cookies()).find((c) => c.name === 'pf_session')!.value;
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await origin?.close();
    await run?.close();
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
    // Remaining and the credit limit: the numbers of the API.
    const me = (await call(api.url, '/api/v1/account', { key: account.apiKey })).body as {
      products: { basic: { remainingGb: number } };
      credit: { limit: number; usedThisMonth: number; available: number; currency: string; month: string };
    };
    await expect(basic.textContent()).resolves.toMatch(
      new RegExp(`^\\s*basic\\s*${me.products.basic.remainingGb} GB`),
    );
    const money = (n: number) =>
      `${n.toLocaleString('en-US', { minimumFractionDigits: 2 })} ${me.credit.currency}`;
    const credit = (await page.locator('#credit').textContent())!.replace(/\s+/g, ' ').trim();
    expect(credit).toBe(
      `Bill-later limit: ${money(me.credit.limit)} per calendar month (UTC). Billed later in ${me.credit.month}: ` +
        `${money(me.credit.usedThisMonth)}; available: ${money(me.credit.available)}.`,
    );
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
    const alertsOf = async () =>
      ((await admin(`/accounts/${account.id}`)).body as { alerts: unknown }).alerts;
    const before = await alertsOf();
    const missing = await postForm(api.url, '/settings/alerts', { lowBandwidthPercent: '50' }, cookie);
    expect(missing.status).toBe(403);
    const forged = await postForm(api.url, '/settings/regenerate-key', { _csrf: 'x'.repeat(43) }, cookie);
    expect(forged.status).toBe(403);
    expect(await alertsOf()).toEqual(before);
    expect((await call(api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(200);
    // Signed-out forms too: a sign-in without the pre-session cookie's token is refused.
    expect((await postForm(api.url, '/sign-in', { email: account.email, password: STRONG }, '')).status).toBe(
      403,
    );
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
    expect(run.seenUrls.length).toBeGreaterThan(0);
    expect(
      run.seenUrls.filter((u) => !u.startsWith(api.url) && !u.startsWith('blob:') && !u.startsWith('data:')),
    ).toEqual([]);
    expect(run.seenUrls.some((u) => /\/assets\/uplot\.[0-9a-f]{12}\.js$/.test(u))).toBe(true);
  });

  it('works 375 px wide: every page fits and passes axe', async () => {
    const narrow = await newContext(browser, api.url, { width: 375, height: 800 });
    const p = await narrow.newPage();
    await signIn(p, account.email, STRONG);
    await p.waitForURL(`${api.url}/`);
    for (const [href, name] of [
      ['/', 'overview'],
      ['/proxies', 'proxies'],
      ['/sub-users', 'sub-users'],
      ['/settings', 'settings'],
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

  it('never wrote a key, password or link token to the log', () => {
    expect(run.logLines.length).toBeGreaterThan(10);
    const log = run.logLines.join('');
    expect(secrets.filter((secret) => log.includes(secret))).toEqual([]);
  });
});
