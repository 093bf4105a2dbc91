// The Billing page's "Buy bandwidth" form in a real Chromium against the real API and database: a
// purchase shows its invoice and the remaining bandwidth at once; the same form posted twice at
// once (its own idempotency key) buys once; a refusal comes back on the form with what was
// typed; without the CSRF token nothing is bought; axe on the page.
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

const rows = tableCells;

const invoices = async () =>
  (await call(api.url, '/api/v1/invoices', { key: account.apiKey })).body.invoices as {
    number: number;
    product: string;
    gb: number;
  }[];

describeInChromium('customer dashboard in Chromium: Buy bandwidth on the Billing page', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    account = (await adminCall(api, '/accounts', { body: { email: exampleEmail('buyer') } }))
      .body as typeof account;
    await signInThroughInvite(run, account);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  it('buys 1.5 GB of mobile: the invoice and the remaining bandwidth show at once', async () => {
    await page.goto('/billing');
    const buy = page.getByRole('region', { name: 'Buy bandwidth' });
    await buy.getByLabel('Product').selectOption('mobile');
    await buy.getByLabel('Bandwidth (GB)').fill('1.5');
    await buy.getByRole('button', { name: 'Buy' }).click();
    await page.waitForURL(`${api.url}/billing?done=bought`);
    expect(await page.locator('.success').textContent()).toContain('Bandwidth bought');
    const listed = await invoices();
    expect(listed).toEqual([expect.objectContaining({ product: 'mobile', gb: 1.5 })]);
    const shown = await rows(page, 'Invoices');
    expect(shown[0]).toEqual([
      `#${listed[0]!.number}`,
      expect.any(String),
      'mobile',
      '1.5 GB',
      'Purchase',
      'issued, unpaid',
      '12.00 USD',
      'PDF',
    ]);
    const refill = await rows(page, 'Auto-refill settings');
    expect(refill.find((r) => r[0] === 'mobile')?.[1]).toBe('1.5 GB');
    await axe(page, 'billing with the buy form');
  });

  it('the same form posted twice at once (a double click, two tabs) buys once', async () => {
    await page.goto('/billing');
    const form = page.getByRole('region', { name: 'Buy bandwidth' }).locator('form');
    // The form as the page served it: its CSRF token and the key made for it.
    const fields = {
      _csrf: await form.locator('input[name=_csrf]').inputValue(),
      key: await form.locator('input[name=key]').inputValue(),
      product: 'basic',
      gb: '2',
    };
    const before = (await invoices()).length;
    const answers = await Promise.all([
      postForm(api.url, '/billing/buy', fields, await sessionCookie(run)),
      postForm(api.url, '/billing/buy', fields, await sessionCookie(run)),
    ]);
    expect(answers.map((a) => [a.status, a.headers.get('location')])).toEqual([
      [303, '/billing?done=bought'],
      [303, '/billing?done=bought'],
    ]);
    expect((await invoices()).length).toBe(before + 1);
  });

  it('a refusal comes back on the form with what was typed; nothing is bought', async () => {
    const before = (await invoices()).length;
    await page.goto('/billing');
    const buy = page.getByRole('region', { name: 'Buy bandwidth' });
    await buy.getByLabel('Product').selectOption('light');
    // Above the per-purchase limit (1000 GB by default): the browser's own check is off for the test.
    await buy.getByLabel('Bandwidth (GB)').evaluate((el) => el.removeAttribute('required'));
    await buy.getByLabel('Bandwidth (GB)').fill('1000.5');
    await buy.getByRole('button', { name: 'Buy' }).click();
    expect(await page.getByRole('alert').textContent()).toContain(
      'Bandwidth (GB): a number of GB greater than 0 and at most 1,000.',
    );
    expect(
      await page.getByRole('region', { name: 'Buy bandwidth' }).getByLabel('Bandwidth (GB)').inputValue(),
    ).toBe('1000.5');
    expect(await page.getByRole('region', { name: 'Buy bandwidth' }).getByLabel('Product').inputValue()).toBe(
      'light',
    );
    expect((await invoices()).length).toBe(before);
  });

  it('without the CSRF token nothing is bought', async () => {
    const before = (await invoices()).length;
    const cookie = await sessionCookie(run);
    const refused = await postForm(
      api.url,
      '/billing/buy',
      { product: 'basic', gb: '1', key: 'k-1' },
      cookie,
    );
    expect(refused.status).toBe(403);
    expect((await invoices()).length).toBe(before);
  });
});
