// The Proxies page's https:// form (docs/adr/0083) in a real Chromium, against the real API and a
// real gateway serving TLS: the Format choice offers https:// only once a plan's endpoint says TLS,
// and for that plan only (another plan gets the API's 409 message); the generated URL is then used
// as it is, by a second Chromium with --proxy-server=https://... (server and credentials taken
// from the URL: Chromium takes no credentials in --proxy-server) and by curl --proxy <url>; both
// pages pass axe at 1280 and 375 px.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { upsertGatewayEndpoint } from '#common/gateway-endpoints.ts';
import type { TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
  launchChromium,
  newContext,
  shot,
  signIn,
  signInThroughInvite,
  startDashboardRun,
  STRONG,
  type DashboardRun,
} from '#test/dashboard.ts';
import type { TestDatabase } from '#test/db.ts';
import { exampleEmail } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, startTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { counterDelta, counterValues } from '#test/gateway/usage.ts';
import { createTestCa, type IssuedCertificate, type TestCa } from '#test/tls.ts';

const run = promisify(execFile);
// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

let dash: DashboardRun;
let db: TestDatabase;
let api: TestApi;
let page: Page;
let ca: TestCa;
let leaf: IssuedCertificate;
let gateway: TestGateway;
let origin: Origin;
let account: { id: string; email: string; apiKey: string; proxyUsername: string };
let generated: string[] = [];

/** The Format select's option values. */
const formats = async (p: Page) =>
  (await p.locator('#gen-format option').all()).reduce<Promise<string[]>>(
    async (acc, o) => [...(await acc), (await o.getAttribute('value')) ?? ''],
    Promise.resolve([]),
  );
const setEndpoint = (tls: boolean) =>
  upsertGatewayEndpoint(db.pool, { plan: 'basic', host: '127.0.0.1', port: gateway.port, tls }, 'test');

/** Fills the generator and sends it; the Generated proxies lines, or [] when refused. */
async function generate(p: Page, provider: string, format: string, count: number): Promise<string[]> {
  await p.getByLabel('Product', { exact: true }).selectOption(provider);
  await p.getByLabel('Country', { exact: true }).fill('us');
  await p.getByLabel('Session type', { exact: true }).selectOption('sticky');
  await p.getByLabel('Format', { exact: true }).selectOption(format);
  await p.getByLabel('Count', { exact: true }).fill(String(count));
  await p.getByRole('button', { name: 'Generate' }).click();
  await p.waitForLoadState();
  const list = p.getByLabel('Generated proxies');
  return (await list.count()) ? (await list.inputValue()).split('\n') : [];
}

describeInChromium('customer dashboard in Chromium: https:// proxies for plans serving TLS', () => {
  beforeAll(async () => {
    dash = await startDashboardRun();
    ({ db, api, page } = dash);
    ca = await createTestCa();
    leaf = await ca.issue('gateway');
    origin = await startOrigin();
    gateway = await startTestGateway(db.pool, db.url, gatewaySpec('basic'), {
      tls: { certFile: leaf.certFile, keyFile: leaf.keyFile },
    });
    await setEndpoint(false);
    const created = await adminCall(api, '/accounts', { body: { email: exampleEmail('tls') } });
    expect(created.status).toBe(201);
    account = created.body as typeof account;
    for (const product of ['basic', 'datacenter'])
      expect(
        (await adminCall(api, `/accounts/${account.id}/purchases`, { body: { product, gb: 1 } })).status,
      ).toBe(201);
    await signInThroughInvite(dash, account);
    await cacheSynced(db.pool, [gateway]);
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await origin?.close();
    await ca?.remove();
    await dash?.close();
  });

  it('offers https:// only once the plan serves TLS, and only for it; gives https:// URLs on the gateway', async () => {
    await page.goto(`${api.url}/proxies`);
    expect(await formats(page)).toEqual(['colon', 'http', 'socks5h', 'csv', 'json', 'template']);
    await expect(page.locator('#gen-format-hint').textContent()).resolves.toContain(
      'No plan serves https://',
    );

    await setEndpoint(true);
    await page.goto(`${api.url}/proxies`);
    expect(await formats(page)).toEqual(['colon', 'http', 'https', 'socks5h', 'csv', 'json', 'template']);
    await expect(page.locator('#gen-format-hint').textContent()).resolves.toContain(
      'https:// (TLS) for basic only',
    );
    await expect(page.locator('#proxy-url-forms').textContent()).resolves.toContain(
      'https://username:password@host:port',
    );

    // Another plan: the API's refusal, on the page, with what was typed kept.
    expect(await generate(page, 'datacenter', 'https', 1)).toEqual([]);
    await expect(
      page.getByText('No TLS is served for datacenter; use scheme http').isVisible(),
    ).resolves.toBe(true);
    await expect(page.getByLabel('Format', { exact: true }).inputValue()).resolves.toBe('https');

    generated = await generate(page, 'basic', 'https', 2);
    expect(generated).toHaveLength(2);
    for (const line of generated)
      expect(line).toMatch(
        new RegExp(
          `^https://${account.proxyUsername}:[^@]+_country-us_session-[a-z0-9]{10}@127\\.0\\.0\\.1:${gateway.port}$`,
        ),
      );
    await expect(
      page.getByText('https://username:password@host:port (TLS to the gateway)').isVisible(),
    ).resolves.toBe(true);
    await axe(page, 'proxies with https:// URLs');
    await shot(page, 'proxies-https');

    // The plain forms stay for every plan.
    const colon = await generate(page, 'datacenter', 'colon', 1);
    expect(colon[0]).toMatch(/^[^:]+:\d+:[^:]+:.+_country-us_session-[a-z0-9]{10}$/);
    expect((await generate(page, 'basic', 'http', 1))[0]).toMatch(/^http:\/\/[^@]+@127\.0\.0\.1:\d+$/);
  });

  it('the generated https:// URL works: Chromium with --proxy-server=https://... and curl --proxy <url>', async () => {
    const url = new URL(generated[0]!);
    const target = `http://127.0.0.1:${origin.port}/peer`;
    const before = await counterValues(gateway, 'proxyfleet_gateway_requests_total');
    const browser = await launchChromium({
      proxy: {
        server: `${url.protocol}//${url.host}`,
        // Chromium never proxies loopback unless told to (its implicit bypass list).
        bypass: '<-loopback>',
        username: decodeURIComponent(url.username),
        password: decodeURIComponent(url.password),
      },
      args: [
        // Trust exactly the gateway's key (no NSS certutil on this machine to add the test CA).
        `--ignore-certificate-errors-spki-list=${leaf.spkiSha256}`,
      ],
    });
    try {
      const p = await browser.newPage();
      const answer = await p.goto(target);
      expect(answer?.status()).toBe(200);
      expect(await p.textContent('body')).toBe('127.0.0.1');
    } finally {
      await browser.close();
    }
    // The URL exactly as the page gave it, credentials and targeting included.
    const curl = await run('curl', [
      '--silent',
      '--proxy',
      generated[1]!,
      '--proxy-cacert',
      ca.caFile,
      target,
    ]);
    expect(curl.stdout).toBe('127.0.0.1');
    const seen = counterDelta(await counterValues(gateway, 'proxyfleet_gateway_requests_total'), before);
    expect(seen.http).toBeGreaterThanOrEqual(2);
  });

  it('375 px wide: the page with https:// URLs fits and passes axe', async () => {
    const narrow = await newContext(dash.browser, api.url, { width: 375, height: 800 });
    const p = await narrow.newPage();
    await signIn(p, account.email, STRONG);
    await p.waitForURL(`${api.url}/`);
    await p.goto(`${api.url}/proxies`);
    expect(await generate(p, 'basic', 'https', 3)).toHaveLength(3);
    await axe(p, 'proxies with https:// URLs at 375 px');
    expect(await p.evaluate<number>('document.documentElement.scrollWidth')).toBe(375);
    await shot(p, 'proxies-https-375');
    await narrow.close();
  });
});
