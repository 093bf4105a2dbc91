// The Billing page's billing details and invoice PDFs in a real Chromium against the real API and
// database: the details set in their form (a refused one comes back as typed), the invoice
// downloaded from its PDF link and read back (pdf-parse) naming them; another account's invoice
// is not served; axe on both pages.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import { readFile } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { PDFParse } from 'pdf-parse';
import { type TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
  signInThroughInvite,
  startDashboardRun,
  type DashboardRun,
} from '#test/dashboard.ts';
import { exampleEmail } from '#test/fixtures.ts';

// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

let run: DashboardRun;
let api: TestApi;
let page: Page;
let account: { id: string; email: string; apiKey: string };
let invoice: { id: string; number: number };

describeInChromium('customer dashboard in Chromium: billing details and invoice PDFs', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    account = (await adminCall(api, '/accounts', { body: { email: exampleEmail('files') } }))
      .body as typeof account;
    invoice = (
      await adminCall(api, `/accounts/${account.id}/purchases`, { body: { product: 'basic', gb: 4 } })
    ).body as typeof invoice;
    await signInThroughInvite(run, account);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  it('sets the billing details; a refused form keeps what was typed', async () => {
    await page.goto('/billing');
    expect(await page.locator('#billing-details').textContent()).toContain(
      `invoices name you by ${account.email}`,
    );
    await page.getByRole('link', { name: 'Change billing details' }).click();
    await page.getByLabel('Company').fill('Nordlicht Analytics AB');
    await page.getByLabel('Address').fill('Sveavägen 10\n111 57 Stockholm');
    await page.getByLabel('VAT ID').fill('SE<556>');
    await page.getByRole('button', { name: 'Save' }).click();
    expect(await page.getByRole('alert').textContent()).toContain(
      'VAT ID: letters, digits, spaces, dots or dashes',
    );
    expect(await page.getByLabel('Company').inputValue()).toBe('Nordlicht Analytics AB');
    await axe(page, 'billing details refused');
    await page.getByLabel('VAT ID').fill('SE556677889901');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${api.url}/billing?done=details`);
    const shown = await page.locator('#billing-details').innerText();
    expect(shown.split('\n')).toEqual([
      'Nordlicht Analytics AB',
      'Sveavägen 10',
      '111 57 Stockholm',
      'VAT ID: SE556677889901',
    ]);
  });

  it("downloads the invoice's PDF, which names the details, the amount and the status", async () => {
    await page.goto('/billing');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: `Download invoice #${invoice.number} as PDF` }).click(),
    ]);
    expect(download.suggestedFilename()).toBe(`invoice-${invoice.number}.pdf`);
    const parser = new PDFParse({ data: await readFile(await download.path()) });
    const text = (await parser.getText()).text;
    await parser.destroy();
    for (const expected of [
      `Invoice ${invoice.number}`,
      'Nordlicht Analytics AB',
      'Sveavägen 10',
      'VAT ID: SE556677889901',
      'basic bandwidth, 4 GB 8.00 USD',
      'Total 8.00 USD',
      'Status: Issued, not paid yet',
    ]) {
      expect(text).toContain(expected);
    }
    await axe(page, 'billing with invoice files');
  });

  it("another account's invoice is not served", async () => {
    const other = (await adminCall(api, '/accounts', { body: { email: exampleEmail('other') } })).body as {
      id: string;
    };
    const theirs = (
      await adminCall(api, `/accounts/${other.id}/purchases`, { body: { product: 'basic', gb: 1 } })
    ).body as { id: string };
    const res = await page.goto(`/billing/invoices/${theirs.id}/pdf`);
    expect(res?.status()).toBe(404);
    expect(await page.getByRole('alert').textContent()).toContain('That invoice does not exist.');
  });
});
