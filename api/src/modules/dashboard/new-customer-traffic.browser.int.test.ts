// "Customers see their traffic", walked as a new customer would, in one account and one browser
// session, in a real Chromium against the real API, database and a gateway whose exits serve two
// countries: signed in through the invite, the primary key regenerated under Settings and copied;
// GET /api/v1/locations with that key names the two countries; on Proxies a list generated as CSV
// (downloaded) and as socks5h:// URLs, one of each used by curl; 2 requests with a wrong password
// and 1 to a destination that never answers; then Usage, yesterday picked, shows those requests by
// outcome, and the CSV it downloads says the same.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { exitLocations, upsertGatewayEndpoint } from '#common/gateway-endpoints.ts';
import { call, type TestApi } from '#test/api.ts';
import {
  describeInChromium,
  newCustomer,
  rowCells,
  signInThroughInvite,
  startDashboardRun,
  type DashboardRun,
  type NewCustomer,
} from '#test/dashboard.ts';
import { curlStatus } from '#test/gateway/client.ts';
import {
  cacheSynced,
  gatewaySpec,
  ONE_SECOND_ANSWER_TIMEOUT,
  startTestGateway,
  type TestGateway,
} from '#test/gateway/fixture.ts';
import { startOrigin, startSilentServer, type Origin } from '#test/gateway/origin.ts';
import { historyMovedBack, historyWritten } from '#test/gateway/usage.ts';

// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

const DAY_MS = 86_400_000;
let run: DashboardRun;
let api: TestApi;
let page: Page;
let gateway: TestGateway;
let origin: Origin;
let silent: Origin;
let account: NewCustomer;
/** The key as the customer copied it from Settings. */
let key: string;
/** The CSV list's rows after its header: host, port, username, password. */
let rows: string[][];

/** The navigation's link to a page, as the customer finds it. */
const open = async (name: string, path: string) => {
  await page.getByRole('navigation').getByRole('link', { name, exact: true }).click();
  await page.waitForURL(`${api.url}${path}`);
};
/** Generate with the Format picked (the form keeps the other fields as they were sent). */
async function generate(format: string): Promise<void> {
  await page.getByLabel('Format', { exact: true }).selectOption(format);
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.waitForLoadState();
}
/** curl through the gateway as an HTTP proxy with the CSV row's username and `password`. */
const throughHttpProxy = (url: string, password: string) => {
  const [host, port, user] = rows[0]!;
  return curlStatus(url, ['--proxy', `http://${host}:${port}`, '--proxy-user', `${user}:${password}`]);
};

describeInChromium('a new customer sees their traffic (Settings, /locations, Proxies, Usage)', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    origin = await startOrigin();
    // A destination that accepts and never answers, behind a gateway whose answer timeout is 1 s.
    silent = await startSilentServer();
    const spec = gatewaySpec(
      'basic',
      [
        { name: 'us', country: 'us' },
        { name: 'de', country: 'de' },
      ],
      ONE_SECOND_ANSWER_TIMEOUT,
    );
    gateway = await startTestGateway(run.db.pool, run.db.url, spec);
    // The plan's endpoint row, its places from the exits, as the operator and dev write it.
    await upsertGatewayEndpoint(
      run.db.pool,
      { plan: 'basic', host: '127.0.0.1', port: gateway.port, locations: exitLocations(spec.spec.exits) },
      'test',
    );
    account = await newCustomer(api, 'walk');
    await cacheSynced(run.db.pool, [gateway]);
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await silent?.close();
    await origin?.close();
    await run?.close();
  });

  it('1. signs in through the invite, regenerates the primary key under Settings and copies it', async () => {
    await signInThroughInvite(run, account);
    await open('Settings', '/settings');
    await page.getByRole('button', { name: 'Regenerate primary key' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Regenerate' }).click();
    const shown = await page.getByLabel('New API key').inputValue();
    await page.getByRole('button', { name: 'Copy' }).click();
    key = await page.evaluate<string>('navigator.clipboard.readText()');
    expect(key).toBe(shown);
    expect(key).toMatch(/^svc_live_[0-9a-f]{48}$/);
    expect(key).not.toBe(account.apiKey);
  });

  it('2. asks /locations with that key: the countries the exits serve', async () => {
    const locations = (k: string) => call(api.url, '/api/v1/locations?product=basic', { key: k });
    expect(await locations(key)).toMatchObject({
      status: 200,
      body: {
        success: true,
        product: 'basic',
        known: true,
        everyCountry: false,
        countries: [
          { country: 'de', states: [] },
          { country: 'us', states: [] },
        ],
      },
    });
    expect((await locations(account.apiKey)).status).toBe(401);
  });

  it('3. generates a list as CSV and as socks5h:// URLs on Proxies; curl gets 200 through each', async () => {
    await open('Proxies', '/proxies');
    await expect(page.locator('#gen-country-hint').textContent()).resolves.toContain(
      'Served: basic: de, us.',
    );
    await page.getByLabel('Product', { exact: true }).selectOption('basic');
    await page.getByLabel('Country', { exact: true }).fill('us');
    await page.getByLabel('Count', { exact: true }).fill('2');
    await generate('csv');
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download .csv' }).click();
    const file = await download;
    expect(file.suggestedFilename()).toBe('proxies-basic.csv');
    const [header, ...body] = readFileSync(await file.path(), 'utf8')
      .trimEnd()
      .split('\r\n')
      .map((line) => line.split(','));
    expect(header).toEqual(['host', 'port', 'username', 'password']);
    rows = body;
    expect(rows.map(([host, port]) => [host, port])).toEqual([
      ['127.0.0.1', String(gateway.port)],
      ['127.0.0.1', String(gateway.port)],
    ]);

    await generate('socks5h');
    const [url] = (await page.getByLabel('Generated proxies').inputValue()).split('\n');
    expect(url).toMatch(new RegExp(`^socks5h://[a-z0-9]+[^@]*@127\\.0\\.0\\.1:${gateway.port}$`));
    await expect(curlStatus(`http://localhost:${origin.port}/bytes/1000`, ['--proxy', url!])).resolves.toBe(
      '200',
    );
    const [, , , password] = rows[0]!;
    await expect(throughHttpProxy(`http://127.0.0.1:${origin.port}/bytes/5000`, password!)).resolves.toBe(
      '200',
    );
  });

  it('4. sends 2 requests with a wrong password (407) and 1 that times out upstream (504)', async () => {
    for (let i = 0; i < 2; i++)
      await expect(
        throughHttpProxy(`http://127.0.0.1:${origin.port}/bytes/10`, 'wrongpassword'),
      ).resolves.toBe('407');
    const [, , , password] = rows[0]!;
    await expect(throughHttpProxy(`http://127.0.0.1:${silent.port}/`, password!)).resolves.toBe('504');
  });

  it("5. (the test's part) the gateway's counts are written, and moved to yesterday", async () => {
    await historyWritten(gateway);
    // The test cannot wait a day: what the gateway wrote today is moved to yesterday, as it stands.
    await historyMovedBack(run.db.pool, account.id);
  });

  it("6. sees yesterday's requests on Usage by outcome, and the same numbers in its CSV", async () => {
    const yesterday = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);

    await open('Usage', '/usage');
    await page.getByLabel('From (UTC day)').fill(yesterday);
    await page.getByLabel('To (UTC day, included)').fill(yesterday);
    await page.getByLabel('Per', { exact: true }).selectOption('day');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL(`${api.url}/usage?from=${yesterday}&to=${yesterday}&granularity=day`);
    // 2 curl requests relayed (SOCKS5 and HTTP), then the 3 the customer's mistakes caused.
    const outcomes = await rowCells(page.getByRole('table', { name: 'Requests by outcome over the range' }));
    expect(outcomes.map(([outcome, requests]) => [outcome, requests])).toEqual([
      ['Succeeded', '2'],
      ['Refused: no bandwidth', '0'],
      ['Refused: bad credentials', '2'],
      ['Refused: throttled', '0'],
      ['Refused: target not allowed', '0'],
      ['Refused: no exit', '0'],
      ['Upstream: connect error', '0'],
      ['Upstream: timeout', '1'],
      ['Other', '0'],
    ]);
    const summary = (await page.locator('#outcomes-h + p').textContent())!.replace(/\s+/g, ' ').trim();
    const [, requests, up, down] = /^([\d,]+) requests, ([\d,]+) bytes up and ([\d,]+) bytes down/.exec(
      summary,
    )!;
    expect(requests).toBe('5');
    await page.getByText('Per day as a table').click();
    await expect(rowCells(page.getByRole('table', { name: 'Requests per day by outcome' }))).resolves.toEqual(
      [[`${yesterday} 00:00`, '5', '2', '2', '1', '0']],
    );

    const download = page.waitForEvent('download');
    await page.getByRole('link', { name: 'Download CSV' }).click();
    const file = await download;
    expect(file.suggestedFilename()).toBe(`usage-day-${yesterday}-${yesterday}.csv`);
    const [header, row, ...more] = readFileSync(await file.path(), 'utf8')
      .trimEnd()
      .split('\r\n')
      .map((line) => line.split(','));
    expect(more).toEqual([]);
    expect(Object.fromEntries(header!.map((name, i) => [name, row![i]]))).toEqual({
      start: `${yesterday}T00:00:00.000Z`,
      bytes_up: up!.replaceAll(',', ''),
      bytes_down: down!.replaceAll(',', ''),
      requests: '5',
      succeeded: '2',
      refused_no_bandwidth: '0',
      refused_bad_credentials: '2',
      refused_throttled: '0',
      refused_target_not_allowed: '0',
      refused_no_exit: '0',
      upstream_connect_error: '0',
      upstream_timeout: '1',
      other: '0',
      status_2xx: '1',
      status_3xx: '0',
      status_4xx: '0',
      status_5xx: '0',
    });
  });
});
