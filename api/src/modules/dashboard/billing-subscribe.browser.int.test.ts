// The Billing page's "Subscribe" form in a real Chromium against the real API and database: a
// plan is confirmed at its monthly price and shows in Subscriptions with its first invoice at
// once; an ISP rental refused for want of proxies says so on the form with what was typed, and
// goes through once an operator assigned them; the confirmation posted twice at once subscribes
// once; without the CSRF token nothing is subscribed; axe on the form and the confirmation.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import { call, type TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
  postForm,
  sessionCookie,
  signInThroughInvite,
  startDashboardRun,
  tableCells,
  type DashboardRun,
} from '#test/dashboard.ts';
import { exampleEmail } from '#test/fixtures.ts';

// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

let run: DashboardRun;
let api: TestApi;
let page: Page;
let account: { id: string; email: string; apiKey: string };

const subscriptions = async () =>
  (await call(api.url, '/api/v1/subscriptions', { key: account.apiKey })).body.subscriptions as {
    id: string;
    kind: string;
  }[];

const form = () => page.getByRole('region', { name: 'Subscribe' });

describeInChromium('customer dashboard in Chromium: Subscribe on the Billing page', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    account = (await adminCall(api, '/accounts', { body: { email: exampleEmail('subscriber') } }))
      .body as typeof account;
    await signInThroughInvite(run, account);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  it('subscribes to 10 GB of basic a month: the price is confirmed, then the row and the invoice show', async () => {
    await page.goto('/billing');
    await form().getByLabel('Subscription').selectOption('bandwidth_plan');
    await form().getByLabel('Product').selectOption('basic');
    await form().getByLabel('GB per month').fill('10');
    await form().getByRole('button', { name: 'Subscribe' }).click();
    await page.getByRole('heading', { name: 'Subscribe to 10 GB basic per month?' }).waitFor();
    expect(await page.locator('#sub-price').textContent()).toContain('20.00 USD per month.');
    await axe(page, 'subscription confirmation');
    expect(await subscriptions()).toEqual([]);
    await page.getByRole('button', { name: 'Confirm and subscribe' }).click();
    await page.waitForURL(`${api.url}/billing?done=subscribed`);
    expect(await page.locator('.success').textContent()).toContain('Subscribed');
    const subs = await tableCells(page, 'Subscriptions');
    expect(subs).toEqual([
      [
        '10 GB basic per month',
        'Active',
        expect.any(String),
        expect.any(String),
        '20.00 USD',
        expect.stringContaining('Turn off renewal'),
      ],
    ]);
    expect(subs[0]![3]).not.toBe('Does not renew');
    const invoices = await tableCells(page, 'Invoices');
    expect(invoices).toEqual([
      [
        expect.stringMatching(/^#\d+$/),
        expect.any(String),
        'basic',
        '10 GB',
        'Renewal',
        'issued, unpaid',
        '20.00 USD',
        'PDF',
      ],
    ]);
    const refill = await tableCells(page, 'Auto-refill settings');
    expect(refill.find((r) => r[0] === 'basic')?.[1]).toBe('10 GB');
    await axe(page, 'billing with the subscribe form');
  });

  it('an ISP rental without proxies is refused on the form with what was typed; assigned, it goes through', async () => {
    const before = (await subscriptions()).length;
    await page.goto('/billing');
    await form().getByLabel('Subscription').selectOption('isp_proxy');
    await form().getByLabel('Country').fill('DE');
    await form().getByLabel('Number of proxies').fill('2');
    await form().getByRole('button', { name: 'Subscribe' }).click();
    expect(await page.locator('#sub-price').textContent()).toContain('10.00 USD per month.');
    await page.getByRole('button', { name: 'Confirm and subscribe' }).click();
    expect(await form().getByRole('alert').textContent()).toContain(
      'Too few ISP proxies in DE to rent: 0 on this account not rented yet, 2 asked for.',
    );
    expect(await form().getByLabel('Subscription').inputValue()).toBe('isp_proxy');
    expect(await form().getByLabel('Country').inputValue()).toBe('DE');
    expect(await form().getByLabel('Number of proxies').inputValue()).toBe('2');
    expect((await subscriptions()).length).toBe(before);

    for (const username of ['de-1', 'de-2'])
      await adminCall(api, `/accounts/${account.id}/isp-proxies`, {
        body: { host: '203.0.113.20', port: 8000, username, country: 'de' },
      });
    await form().getByRole('button', { name: 'Subscribe' }).click();
    await page.getByRole('button', { name: 'Confirm and subscribe' }).click();
    await page.waitForURL(`${api.url}/billing?done=subscribed`);
    expect((await tableCells(page, 'Subscriptions')).map((r) => r[0])).toContain('2 ISP proxies (DE)');
    expect((await subscriptions()).length).toBe(before + 1);
  });

  it('a form the schema refuses comes back with the field named; nothing is subscribed', async () => {
    const before = (await subscriptions()).length;
    await page.goto('/billing');
    // Past the per-purchase limit (1000 GB by default), which the browser does not know.
    await form().getByLabel('GB per month').fill('1001');
    await form().getByRole('button', { name: 'Subscribe' }).click();
    expect(await form().getByRole('alert').textContent()).toContain(
      'GB per month: a whole number of GB from 1 to 1,000.',
    );
    expect(await form().getByLabel('GB per month').inputValue()).toBe('1001');
    expect((await subscriptions()).length).toBe(before);
  });

  it('the confirmation posted twice at once (a double click, two tabs) subscribes once', async () => {
    await page.goto('/billing');
    const fields = {
      _csrf: await form().locator('input[name=_csrf]').inputValue(),
      key: await form().locator('input[name=key]').inputValue(),
      kind: 'bandwidth_plan',
      product: 'mobile',
      gbPerPeriod: '1',
      paymentMethod: 'invoice',
    };
    const before = (await subscriptions()).length;
    const answers = await Promise.all([
      postForm(api.url, '/billing/subscribe/confirm', fields, await sessionCookie(run)),
      postForm(api.url, '/billing/subscribe/confirm', fields, await sessionCookie(run)),
    ]);
    expect(answers.map((a) => [a.status, a.headers.get('location')])).toEqual([
      [303, '/billing?done=subscribed'],
      [303, '/billing?done=subscribed'],
    ]);
    expect((await subscriptions()).length).toBe(before + 1);
  });

  it('without the CSRF token nothing is subscribed', async () => {
    const before = (await subscriptions()).length;
    const refused = await postForm(
      api.url,
      '/billing/subscribe/confirm',
      { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: '1', paymentMethod: 'invoice', key: 'k-1' },
      await sessionCookie(run),
    );
    expect(refused.status).toBe(403);
    expect((await subscriptions()).length).toBe(before);
  });
});
