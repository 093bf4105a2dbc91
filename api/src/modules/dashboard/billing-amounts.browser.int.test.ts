// The Billing page's invoices show what each one costs, in the invoice's own currency, as
// GET /api/v1/invoices states it (the page listed number, product, bandwidth and status, but no
// amount). In a real Chromium against the real API and database; axe on the page.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import { call, type TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
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

const cells = tableCells;

describeInChromium('customer dashboard in Chromium: invoice amounts on the Billing page', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    account = (await adminCall(api, '/accounts', { body: { email: exampleEmail('amounts') } }))
      .body as typeof account;
    for (const [product, gb] of [
      ['basic', 2],
      ['mobile', 0.5],
    ] as const) {
      const bought = await adminCall(api, `/accounts/${account.id}/purchases`, { body: { product, gb } });
      expect(bought.status).toBe(201);
    }
    await signInThroughInvite(run, account);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  it("shows each invoice's amount and currency, as the API states them", async () => {
    const listed = (await call(api.url, '/api/v1/invoices', { key: account.apiKey })).body as {
      invoices: { number: number; amount: number | null; currency: string }[];
    };
    expect(listed.invoices).toHaveLength(2);
    await page.goto('/billing');
    const rows = await cells(page, 'Invoices');
    // The amount is the last column but the PDF link's.
    expect(rows.map((r) => [r[0], r.at(-2)])).toEqual(
      listed.invoices.map((i) => [`#${i.number}`, `${i.amount!.toFixed(2)} ${i.currency}`]),
    );
    expect(rows.every((r) => /^\d+\.\d\d [A-Z]{3}$/.test(r.at(-2) ?? '') && r.at(-2) !== '0.00 USD')).toBe(
      true,
    );
    await axe(page, 'billing with invoice amounts');
  });
});
