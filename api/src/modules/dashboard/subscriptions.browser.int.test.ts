// The Billing page's subscriptions in a real Chromium against the real API and database: what
// renews, when and for how much; "Turn off renewal" through the confirmation dialog (and the page
// without JavaScript), refused without the CSRF token, recorded in the audit log as the signed-in
// person; renewal invoices listed as "Renewal"; axe at 1280 and 375 px.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import { paymentMethods } from '#common/billing/payment.ts';
import { renewDue } from '#common/billing/renewals.ts';
import { createLogger } from '#common/logger.ts';
import { call, type CallOptions, type TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
  newContext,
  postForm,
  shot,
  signIn,
  signInThroughInvite,
  startDashboardRun,
  STRONG,
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
let plan: { id: string };
let isp: { id: string };

const admin = (p: string, o: CallOptions = {}) => adminCall(api, p, o);
const cells = tableCells;

describeInChromium('customer dashboard in Chromium: Billing subscriptions', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    const created = await admin('/accounts', { body: { email: exampleEmail('subs') } });
    account = created.body as typeof account;
    plan = (
      await admin(`/accounts/${account.id}/subscriptions`, {
        body: { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 10 },
      })
    ).body as typeof plan;
    isp = (
      await admin(`/accounts/${account.id}/subscriptions`, {
        body: { kind: 'isp_proxy', country: 'de', proxyCount: 2 },
      })
    ).body as typeof isp;
    await renewDue(run.db.pool, {
      methods: paymentMethods(),
      graceDays: 3,
      logger: createLogger('test', 'silent'),
    });
    await signInThroughInvite(run, account);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  it('lists each subscription with its next renewal and price, and renewal invoices as "Renewal"', async () => {
    await page.goto('/billing');
    const subs = await cells(page, 'Subscriptions');
    expect(subs.map((r) => [r[0], r[1], r[4]])).toEqual([
      ['10 GB basic per month', 'Active', '20.00 USD'],
      ['2 ISP proxies (DE)', 'Active', '10.00 USD'],
    ]);
    const list = (await call(api.url, '/api/v1/subscriptions', { key: account.apiKey })).body as {
      subscriptions: { nextRenewalAt: string }[];
    };
    const shown = (iso: string) => new Date(iso).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
    expect(subs[0]![3]).toBe(shown(list.subscriptions[0]!.nextRenewalAt));
    const invoices = await cells(page, 'Invoices');
    // Newest first: the ISP rental's renewal (no product: its description) and the plan's (basic, 10 GB).
    expect(invoices.filter((r) => r[4] === 'Renewal').map((r) => [r[2]!.replace(/, .*/, ''), r[3]])).toEqual([
      ['2 ISP proxies (DE)', '–'],
      ['basic', '10 GB'],
    ]);
    await axe(page, 'billing with subscriptions');
    await shot(page, 'billing-subscriptions');
  });

  it('"Turn off renewal" asks first, then the plan no longer renews; audited as the signed-in person', async () => {
    await page.goto('/billing');
    const row = page.getByRole('row', { name: /10 GB basic per month/ });
    await row.getByRole('button', { name: 'Turn off renewal' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.getByRole('heading').textContent()).toBe(
      'Turn off renewal of 10 GB basic per month?',
    );
    await axe(page, 'billing, turn off renewal dialog');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await cells(page, 'Subscriptions'))[0]![3]).not.toBe('Does not renew');
    await row.getByRole('button', { name: 'Turn off renewal' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Turn off renewal' }).click();
    await page.waitForURL(`${api.url}/billing?done=renewal-off`);
    await expect(page.getByRole('status').filter({ hasText: 'Renewal turned off' }).count()).resolves.toBe(1);
    const subs = await cells(page, 'Subscriptions');
    expect(subs[0]![3]).toBe('Does not renew');
    expect(subs[1]![3]).not.toBe('Does not renew');
    const api1 = (await call(api.url, '/api/v1/subscriptions', { key: account.apiKey })).body as {
      subscriptions: { id: string; autoRenew: boolean }[];
    };
    expect(api1.subscriptions.find((s) => s.id === plan.id)?.autoRenew).toBe(false);
    const log = await admin(`/accounts/${account.id}/audit-log?limit=50`);
    const entry = (log.body.entries as { action: string; actor: { kind: string; id: string } }[]).find(
      (e) => e.action === 'subscription.auto_renew_changed',
    );
    expect(entry?.actor).toMatchObject({ kind: 'dashboard', id: account.email });
  });

  it('without the CSRF token the change is refused; without JavaScript the confirmation is a page', async () => {
    const cookie = (await run.context.cookies())
      .filter((c) => c.name === 'pf_session')
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
    const refused = await postForm(api.url, `/billing/subscriptions/${isp.id}/renewal-off`, {}, cookie);
    expect(refused.status).toBe(403);
    const confirm = await fetch(`${api.url}/billing/subscriptions/${isp.id}/renewal-off`, {
      headers: { cookie },
    });
    expect(confirm.status).toBe(200);
    expect(await confirm.text()).toContain('Turn off renewal of 2 ISP proxies (DE)?');
    // A subscription that no longer renews (or another account's) has nothing to turn off.
    expect(
      (await fetch(`${api.url}/billing/subscriptions/${plan.id}/renewal-off`, { headers: { cookie } }))
        .status,
    ).toBe(404);
    const list = (await call(api.url, '/api/v1/subscriptions', { key: account.apiKey })).body as {
      subscriptions: { id: string; autoRenew: boolean }[];
    };
    expect(list.subscriptions.find((s) => s.id === isp.id)?.autoRenew).toBe(true);
  });

  it('works 375 px wide: fits and passes axe', async () => {
    const narrow = await newContext(run.browser, api.url, { width: 375, height: 800 });
    const p = await narrow.newPage();
    await signIn(p, account.email, STRONG);
    await p.waitForURL(`${api.url}/`);
    await p.goto('/billing');
    await axe(p, 'billing with subscriptions at 375 px');
    const width = await p.evaluate<number>('document.documentElement.scrollWidth');
    expect(width).toBe(375);
    await shot(p, 'billing-subscriptions-375');
    await narrow.close();
  });
});
