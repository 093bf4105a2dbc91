// "Money comes in", walked as a new customer on the real `npm start` (dev/main.ts on its embedded
// database, stripe-mock from scripts/install-tools.sh's bin dir) in a real Chromium: an operator
// creates the account and its dashboard invite; the customer signs in, saves a card on the
// stand-in's hosted page (dev/stripe-checkout.ts: the webhooks it sends, signed as Stripe signs,
// save it), buys 1 GB of basic by card (3-D Secure confirmed on the stand-in's page; the webhook
// buys), sees the invoice paid on Billing and in its PDF, and proxies through the dev gateway to a
// local origin; then a bill-later purchase refused at the credit limit is bought once the
// operator marked the open invoice paid (the CLI). Nothing here stubs Stripe's pages or signs an
// event itself: what a person gets on `npm start` is what is tested.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import type { Browser, Page } from 'playwright-core';
import { PDFParse } from 'pdf-parse';
import { runCapturedCli } from '#test/cli.ts';
import {
  acceptInvite,
  axe,
  describeInChromium,
  launchChromium,
  newContext,
  proxyLineStatus,
  tableCells,
} from '#test/dashboard.ts';
import { writeDevGateways } from '#test/dev-gateways.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { toolsBinDir } from '#test/kube/env.ts';
import { freePort } from '#test/ports.ts';
import { startEntrypoint, stopProcess, until, waitForHttp, type RunningProcess } from '#test/process.ts';
import { stripeMockBinary } from './stripe-mock.ts';

// A cold embedded PostgreSQL, stripe-mock and a browser on a shared 2-core machine: generous
// bounds; nothing here measures speed.
jest.setTimeout(180_000);

const haveStripeMock = stripeMockBinary(toolsBinDir()) !== null;
if (!haveStripeMock)
  console.warn(
    `SKIPPED: the npm start card walk needs stripe-mock in ${toolsBinDir()} (bash scripts/install-tools.sh builds it)`,
  );
const describeOnNpmStart = haveStripeMock ? describeInChromium : describe.skip;

let dataDir: string;
let proc: RunningProcess | undefined;
let api: string;
let gatewayPort: number;
let adminToken: string;
let origin: Origin | undefined;
let browser: Browser | undefined;
let page: Page;
let account: { id: string; email: string };

/** The operator's admin API on the running platform. */
async function admin(method: string, p: string, body?: unknown): Promise<any> {
  const res = await fetch(`${api}/admin/v1${p}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p} answered ${res.status}: ${text}`);
  return JSON.parse(text);
}

const region = (name: string) => page.getByRole('region', { name });
const basicBought = async () =>
  (await tableCells(page, 'Auto-refill settings')).find((r) => r[0] === 'basic')?.[1];

/** The Buy bandwidth form filled and sent with one of its buttons. */
async function buy(gb: string, button: RegExp) {
  await region('Buy bandwidth').getByLabel('Product').selectOption('basic');
  await region('Buy bandwidth').getByLabel('Bandwidth (GB)').fill(gb);
  await region('Buy bandwidth').getByRole('button', { name: button }).click();
}

describeOnNpmStart('npm start with stripe-mock: a new customer pays by card and by invoice', () => {
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'pf-cards-'));
    const apiPort = await freePort();
    gatewayPort = await freePort();
    const gateways = await writeDevGateways(dataDir, [{ plan: 'basic', port: gatewayPort }]);
    // As README says to try it: the gateway may reach a local origin.
    proc = startEntrypoint('dev/main.ts', {
      PROXYFLEET_DATA_DIR: dataDir,
      PROXYFLEET_API_PORT: String(apiPort),
      PROXYFLEET_DEV_GATEWAYS: gateways,
      PROXYFLEET_GATEWAY_ALLOW_CIDRS: '127.0.0.0/8',
      PROXYFLEET_TOOLS_BIN: toolsBinDir(),
    });
    api = `http://127.0.0.1:${apiPort}`;
    try {
      await waitForHttp(`${api}/readyz`, 200, 120_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${proc.lines.join('\n')}`);
    }
    expect(proc.lines.join('\n')).toContain('card payments go to stripe-mock');
    adminToken = (await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
    origin = await startOrigin();
    browser = await launchChromium();
    page = await (await newContext(browser, api)).newPage();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await stopProcess(proc);
    await origin?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("the operator invites; the customer signs in and saves a card on the stand-in's hosted page", async () => {
    const created = await admin('POST', '/accounts', { email: 'new-customer@example.test' });
    account = { id: created.id, email: created.email };
    const invite = await admin('POST', `/accounts/${account.id}/dashboard-invite`);
    await acceptInvite(page, api, invite.url, account.email);

    await page.goto('/billing');
    expect(await region('Card').textContent()).toContain('No card is saved.');
    await region('Card').getByRole('button', { name: 'Save a card' }).click();
    await page.getByRole('link', { name: 'Continue to Stripe' }).click();
    // Not checkout.stripe.com (unreachable, and it would not know this platform): the stand-in.
    expect(new URL(page.url()).host).not.toBe(new URL(api).host);
    expect(page.url()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/checkout\/cs_test_dev_/);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Save a card');
    await page.getByRole('button', { name: 'Save test card' }).click();
    await page.waitForURL(`${api}/billing?done=card-saved`);
    // Saved by setup_intent.succeeded, which the stand-in delivered before sending the person back.
    expect(await region('Card').textContent()).toContain('Saved card: visa 3155.');
    await axe(page, 'billing with the card saved on npm start');
  });

  it("buys 1 GB of basic by card: 3-D Secure on the stand-in's page, bought by the webhook, the invoice paid and its PDF", async () => {
    await page.goto('/billing');
    expect(await basicBought()).toBe('0 GB');
    await buy('1', /^Pay by card/);
    await page.waitForURL(`${api}/billing?done=card-confirm`);
    expect(await basicBought()).toBe('0 GB');
    await region('Card').getByRole('link', { name: 'Confirm the payment with your bank' }).click();
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Confirm the payment');
    await page.getByRole('button', { name: 'Pay 2.00 USD' }).click();
    await page.waitForURL(`${api}/billing?done=card-confirmed`);

    // Bought by the webhook, which the stand-in delivers before sending the person back; on a
    // loaded CI machine the page once still read 0 GB right after (not reproduced since): the page
    // is read again until the bandwidth shows, for at most 15 s, as a person would reload it.
    for (const until = Date.now() + 15_000; (await basicBought()) !== '1 GB' && Date.now() < until;)
      await page.reload();
    expect(await basicBought()).toBe('1 GB');
    const [invoice] = await tableCells(page, 'Invoices');
    expect(invoice).toEqual([
      expect.stringMatching(/^#\d+$/),
      expect.any(String),
      'basic',
      '1 GB',
      'Purchase',
      expect.stringMatching(/^paid on /),
      '2.00 USD',
      'PDF',
    ]);
    expect(await region('Card').textContent()).not.toContain('Card payments waiting');

    const number = invoice![0]!.slice(1);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: `Download invoice #${number} as PDF` }).click(),
    ]);
    const parser = new PDFParse({ data: await readFile(await download.path()) });
    const text = (await parser.getText()).text;
    await parser.destroy();
    for (const expected of [
      `Invoice ${number}`,
      account.email,
      'basic bandwidth, 1 GB 2.00 USD',
      'Total 2.00 USD',
      'Status: Paid on ',
    ])
      expect(text).toContain(expected);
  });

  it('proxies a request through the dev gateway with a proxy line from the Proxies page', async () => {
    await page.goto('/proxies');
    await page.getByLabel('Product', { exact: true }).selectOption('basic');
    await page.getByLabel('Count', { exact: true }).fill('1');
    await page.getByRole('button', { name: 'Generate' }).click();
    const line = await page.getByLabel('Generated proxies').inputValue();
    expect(line).toContain(`127.0.0.1:${gatewayPort}:`);
    const target = `http://127.0.0.1:${origin!.port}/bytes/20000`;
    // The gateway learns the new account and its bandwidth from the change feed, not at once.
    await until(async () => (await proxyLineStatus(line, target)) === 200, 'the proxy to answer 200', 60_000);
  });

  it('bill later: refused at the credit limit until the operator marks the open invoice paid', async () => {
    await admin('PUT', `/accounts/${account.id}/credit-limit`, { limit: 5 });
    await page.goto('/billing');
    await buy('2', /^Buy$/);
    await page.waitForURL(`${api}/billing?done=bought`);
    const open = (await tableCells(page, 'Invoices'))[0]!;
    expect(open.slice(2, 7)).toEqual(['basic', '2 GB', 'Purchase', 'issued, unpaid', '4.00 USD']);

    // 4.00 unpaid of 5.00 (the card's paid 2.00 never counted): 1 GB more (2.00) passes the limit.
    await buy('1', /^Buy$/);
    expect(await page.getByRole('alert').textContent()).toContain(
      'would pass the monthly credit limit of 5.00 USD; available this month: 1.00 USD',
    );
    expect(await tableCells(page, 'Invoices')).toHaveLength(2);

    const invoices = (await admin('GET', `/accounts/${account.id}/invoices`)).invoices as Array<{
      id: string;
      number: number;
      status: string;
    }>;
    const issued = invoices.filter((i) => i.status === 'issued');
    expect(issued.map((i) => `#${i.number}`)).toEqual([open[0]]);
    const paid = await runCapturedCli(['admin', 'invoices', 'pay', issued[0]!.id], {
      PROXYFLEET_API_URL: api,
      PROXYFLEET_ADMIN_TOKEN: adminToken,
    });
    expect(paid).toMatchObject({ code: 0, err: '' });
    expect(JSON.parse(paid.out)).toMatchObject({ id: issued[0]!.id, status: 'paid' });

    // The refused form came back as typed: the same purchase again, now within the limit.
    expect(await region('Buy bandwidth').getByLabel('Bandwidth (GB)').inputValue()).toBe('1');
    await region('Buy bandwidth').getByRole('button', { name: /^Buy$/ }).click();
    await page.waitForURL(`${api}/billing?done=bought`);
    const after = await tableCells(page, 'Invoices');
    expect(after.map((r) => r.slice(3, 7))).toEqual([
      ['1 GB', 'Purchase', 'issued, unpaid', '2.00 USD'],
      ['2 GB', 'Purchase', expect.stringMatching(/^paid on /), '4.00 USD'],
      ['1 GB', 'Purchase', expect.stringMatching(/^paid on /), '2.00 USD'],
    ]);
  });
});
