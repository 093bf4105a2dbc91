// The Proxies page's Format picker and downloads (docs/adr/0087) in a real Chromium, against the
// real API, database and a gateway: CSV and JSON downloaded as the API's own `lines` and `entries`
// give them, a socks5h:// URL used by curl through the gateway, a template filled and a template
// with an unknown placeholder refused in the API's words with what was typed kept, and the Country
// field suggesting only what the exits serve (an unserved one refused as the API does); axe on each.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { upsertGatewayEndpoint } from '#common/gateway-endpoints.ts';
import { call, type TestApi } from '#test/api.ts';
import {
  axe,
  describeInChromium,
  newCustomer,
  signInThroughInvite,
  startDashboardRun,
  type DashboardRun,
  type NewCustomer,
} from '#test/dashboard.ts';
import { cacheSynced, gatewaySpec, startTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { curlStatus } from '#test/gateway/client.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';

// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

let run: DashboardRun;
let api: TestApi;
let page: Page;
let gateway: TestGateway;
let origin: Origin;
let account: NewCustomer;

/** Rotating proxies: every line the same, so the page and the API can be compared exactly. */
async function generate(format: string, template = ''): Promise<void> {
  await page.goto('/proxies');
  await page.getByLabel('Product', { exact: true }).selectOption('basic');
  await page.getByLabel('Country', { exact: true }).fill('us');
  await page.getByLabel('Session type', { exact: true }).selectOption('rotating');
  await page.getByLabel('Format', { exact: true }).selectOption(format);
  await page.getByLabel('Template', { exact: true }).fill(template);
  await page.getByLabel('Count', { exact: true }).fill('2');
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.waitForLoadState();
}
const fromApi = async (fields: Record<string, string>) =>
  (
    await call(api.url, '/api/v1/proxies/generate', {
      key: account.apiKey,
      body: { provider: 'basic', country: 'us', sessionType: 'rotating', count: 2, ...fields },
    })
  ).body as { lines?: string[]; entries?: unknown[] };
async function downloaded(name: string): Promise<{ file: string; text: string }> {
  const download = page.waitForEvent('download');
  await page.getByRole('button', { name }).click();
  const file = await download;
  return { file: file.suggestedFilename(), text: readFileSync(await file.path(), 'utf8') };
}

describeInChromium('customer dashboard in Chromium: proxy list formats', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    origin = await startOrigin();
    gateway = await startTestGateway(run.db.pool, run.db.url, gatewaySpec('basic'));
    await upsertGatewayEndpoint(
      run.db.pool,
      { plan: 'basic', host: '127.0.0.1', port: gateway.port },
      'test',
    );
    account = await newCustomer(api, 'formats');
    await cacheSynced(run.db.pool, [gateway]);
    await signInThroughInvite(run, account);
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await origin?.close();
    await run?.close();
  });

  it('offers every format; CSV and JSON download as the API gives them', async () => {
    await page.goto('/proxies');
    const offered = await page
      .locator('#gen-format option')
      .evaluateAll((os) => os.map((o) => o.getAttribute('value') ?? ''));
    expect(offered).toEqual(['colon', 'http', 'socks5h', 'csv', 'json', 'template']);

    await generate('csv');
    const csv = (await fromApi({ format: 'csv' })).lines!;
    expect(csv[0]).toBe('host,port,username,password');
    await expect(page.getByLabel('Generated proxies').inputValue()).resolves.toBe(csv.join('\n'));
    await axe(page, 'proxies as csv');
    expect(await downloaded('Download .csv')).toEqual({
      file: 'proxies-basic.csv',
      text: csv.join('\r\n') + '\r\n',
    });

    await generate('json');
    const { file, text } = await downloaded('Download .json');
    expect(file).toBe('proxies-basic.json');
    expect(JSON.parse(text)).toEqual((await fromApi({ format: 'json' })).entries);
  });

  it('a socks5h:// URL from the page works with curl through the gateway', async () => {
    await generate('socks5h');
    const [url] = (await page.getByLabel('Generated proxies').inputValue()).split('\n');
    expect(url).toMatch(new RegExp(`^socks5h://[a-z0-9]+:[^@]+@127\\.0\\.0\\.1:${gateway.port}$`));
    await expect(curlStatus(`http://localhost:${origin.port}/bytes/1000`, ['--proxy', url!])).resolves.toBe(
      '200',
    );
    expect(await downloaded('Download .txt')).toMatchObject({ file: 'proxies-basic.txt' });
  });

  it('fills a template, and refuses an unknown placeholder in the API words, keeping what was typed', async () => {
    await generate('template', 'proxy {host} {port} login {user} {pass}');
    const lines = (await fromApi({ format: 'template', template: 'proxy {host} {port} login {user} {pass}' }))
      .lines!;
    await expect(page.getByLabel('Generated proxies').inputValue()).resolves.toBe(lines.join('\n'));
    expect(lines[0]).toMatch(new RegExp(`^proxy 127\\.0\\.0\\.1 ${gateway.port} login \\S+ \\S+$`));

    await generate('template', '{host}:{password}');
    await expect(page.getByRole('alert').textContent()).resolves.toContain(
      'Template: has unknown placeholder {password}; use {host}, {port}, {user}, {pass}',
    );
    await expect(page.getByLabel('Template', { exact: true }).inputValue()).resolves.toBe(
      '{host}:{password}',
    );
    await expect(page.getByLabel('Generated proxies').count()).resolves.toBe(0);
    await axe(page, 'proxies template refused');
  });

  it('suggests only the countries the exits serve, and shows the refusal of one they do not', async () => {
    const endpoint = { plan: 'basic', host: '127.0.0.1', port: gateway.port } as const;
    await upsertGatewayEndpoint(
      run.db.pool,
      { ...endpoint, locations: [{ country: 'us' }, { country: 'de' }] },
      'test',
    );
    try {
      await page.goto('/proxies');
      await expect(page.locator('#gen-country-hint').textContent()).resolves.toContain(
        'Served: basic: de, us.',
      );
      const suggested = await page
        .locator('#gen-countries option')
        .evaluateAll((os) => os.map((o) => o.getAttribute('value')));
      expect(suggested).toEqual(['de', 'us']);
      await page.getByLabel('Country', { exact: true }).fill('fr');
      await page.getByRole('button', { name: 'Generate' }).click();
      await expect(page.getByRole('alert').textContent()).resolves.toContain(
        'No basic exit serves country fr; see GET /api/v1/locations?product=basic',
      );
      await axe(page, 'proxies target refused');
    } finally {
      await upsertGatewayEndpoint(run.db.pool, endpoint, 'test');
    }
  });
});
