// The Usage page in a real Chromium, against the real API, database and a real gateway: a customer
// whose traffic yesterday had 2 requests refused for bad credentials, 1 upstream timeout and 1
// success opens Usage, reads those numbers in the outcome table, downloads the CSV and reads the
// same numbers there; a reversed range is refused on the page; axe at 1280 px.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import type { TestApi } from '#test/api.ts';
import {
  axe,
  describeInChromium,
  newCustomer,
  shot,
  signInThroughInvite,
  startDashboardRun,
  type DashboardRun,
  type NewCustomer,
} from '#test/dashboard.ts';
import {
  cacheSynced,
  gatewaySpec,
  ONE_SECOND_ANSWER_TIMEOUT,
  startTestGateway,
  type TestGateway,
} from '#test/gateway/fixture.ts';
import { startOrigin, startSilentServer, type Origin } from '#test/gateway/origin.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
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
const yesterday = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);

/** The Outcomes table as [outcome, requests] pairs. */
const outcomes = (p: Page) =>
  p
    .getByRole('region', { name: 'Outcomes' })
    .locator('tbody tr')
    .evaluateAll((trs) =>
      trs.map((tr) => [
        (tr.querySelector('th')?.textContent ?? '').trim(),
        (tr.querySelector('td')?.textContent ?? '').trim(),
      ]),
    );

describeInChromium('customer dashboard in Chromium: Usage', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    origin = await startOrigin();
    // A destination that accepts and never answers, behind a gateway whose answer timeout is 1 s.
    silent = await startSilentServer();
    gateway = await startTestGateway(
      run.db.pool,
      run.db.url,
      gatewaySpec('basic', undefined, ONE_SECOND_ANSWER_TIMEOUT),
    );
    account = await newCustomer(api, 'usage');
    await cacheSynced(run.db.pool, [gateway]);
    await signInThroughInvite(run, account);
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await silent?.close();
    await origin?.close();
    await run?.close();
  });

  it("shows yesterday's requests with 2 refused for bad credentials and 1 upstream timeout, and the CSV says the same", async () => {
    const good = basicAuth(account.proxyUsername, account.proxyPassword);
    const wrong = basicAuth(account.proxyUsername, 'wrongpassword');
    const ok = await rawExchange(gateway.port, [get(`http://127.0.0.1:${origin.port}/bytes/5000`, good)]);
    expect(ok.responses.map((r) => r.status)).toEqual([200]);
    for (let i = 0; i < 2; i++) {
      const refused = await rawExchange(gateway.port, [get(`http://127.0.0.1:${origin.port}/`, wrong)]);
      expect(refused.responses.map((r) => r.status)).toEqual([407]);
    }
    const timedOut = await rawExchange(gateway.port, [get(`http://127.0.0.1:${silent.port}/`, good)]);
    expect(timedOut.responses.map((r) => r.status)).toEqual([504]);
    await historyWritten(gateway);
    // The test cannot wait a day: what the gateway wrote today is moved to yesterday, as it stands.
    await historyMovedBack(run.db.pool, account.id);

    await page.getByRole('link', { name: 'Usage' }).click();
    await page.waitForURL(`${api.url}/usage`);
    await expect(outcomes(page)).resolves.toEqual(
      expect.arrayContaining([
        ['Succeeded', '1'],
        ['Refused: bad credentials', '2'],
        ['Upstream: timeout', '1'],
        ['Refused: no bandwidth', '0'],
      ]),
    );
    await page.getByText('Per day as a table').click();
    const day = page.getByRole('row', { name: new RegExp(`^${yesterday} 00:00`) });
    await expect(
      day.locator('td').evaluateAll((tds) => tds.map((td) => (td.textContent ?? '').trim())),
    ).resolves.toEqual(['4', '1', '2', '1', '0']);
    await axe(page, 'usage');
    await shot(page, 'usage');

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download CSV' }).click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/^usage-day-.*\.csv$/);
    const lines = readFileSync(await download.path(), 'utf8')
      .trimEnd()
      .split('\r\n');
    const header = lines[0]!.split(',');
    const row = lines.find((l) => l.startsWith(`${yesterday}T00:00:00.000Z,`))!.split(',');
    const field = (name: string) => row[header.indexOf(name)];
    expect(['requests', 'succeeded', 'refused_bad_credentials', 'upstream_timeout'].map(field)).toEqual([
      '4',
      '1',
      '2',
      '1',
    ]);
  });

  it('refuses a reversed range on the page, naming the field by its label', async () => {
    const response = await page.goto(`/usage?from=${yesterday}&to=2020-01-01&granularity=day`);
    expect(response?.status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toMatch(/must be before to/);
  });
});
