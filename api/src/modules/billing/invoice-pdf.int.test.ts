// GET /api/v1/invoices/:id/pdf and the billing details it names: the PDF's text read back (pdf-parse)
// holds the seller from PROXYFLEET_SELLER_*, the customer's details, number, dates, line, amount,
// currency and status; another account's invoice is 404; bad details are 400.
import { describe, expect, test } from '@jest/globals';
import { PDFParse } from 'pdf-parse';
import { exampleEmail } from '#test/fixtures.ts';
import { adminOf, call, newAccountVia, useTestApi } from '#test/api.ts';

const fx = useTestApi({
  env: {
    PROXYFLEET_SELLER_NAME: 'Acme Proxies Ltd',
    PROXYFLEET_SELLER_ADDRESS: '1 Harbour Road\\nDublin D02 XY45\\nIreland',
    PROXYFLEET_SELLER_TAX_ID: 'IE1234567T',
  },
});
const admin = adminOf(fx);

const newAccount = () => newAccountVia(fx, exampleEmail('pdf'));

/** The PDF as bytes (call() would read it as text). */
async function pdfOf(apiKey: string, invoiceId: string) {
  const res = await fetch(`${fx.api.url}/api/v1/invoices/${invoiceId}/pdf`, {
    headers: { 'x-api-key': apiKey },
  });
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

async function textOf(bytes: Buffer): Promise<string> {
  const parser = new PDFParse({ data: bytes });
  try {
    return (await parser.getText()).text;
  } finally {
    await parser.destroy();
  }
}

describe('GET /api/v1/invoices/:id/pdf', () => {
  test("names the seller and the customer's details, the line, amount, currency and status", async () => {
    const account = await newAccount();
    const me = (path: string, options: Parameters<typeof call>[2] = {}) =>
      call(fx.api.url, `/api/v1${path}`, { key: account.apiKey, ...options });
    const details = {
      company: 'Müller Datendienste GmbH',
      address: 'Torstraße 1\n10115 Berlin',
      vatId: 'DE 123456789',
    };
    expect(await me('/billing-details', { method: 'PUT', body: details })).toMatchObject({
      status: 200,
      body: details,
    });
    expect((await me('/billing-details')).body).toEqual({ ...details, success: true });

    const bought = await me('/purchases', {
      body: { product: 'mobile', gb: 1.25 },
      headers: { 'Idempotency-Key': 'pdf-1' },
    });
    expect(bought.status).toBe(201);
    const invoice = bought.body as { id: string; number: number; issuedAt: string };

    const { res, bytes } = await pdfOf(account.apiKey, invoice.id);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    expect(res.headers.get('content-disposition')).toBe(
      `attachment; filename="invoice-${invoice.number}.pdf"`,
    );
    expect(bytes.subarray(0, 5).toString()).toBe('%PDF-');
    const text = await textOf(bytes);
    for (const expected of [
      `Invoice ${invoice.number}`,
      `Issued: ${invoice.issuedAt.slice(0, 10)}`,
      'Status: Issued, not paid yet',
      'Acme Proxies Ltd',
      '1 Harbour Road',
      'Dublin D02 XY45',
      'Tax ID: IE1234567T',
      'Müller Datendienste GmbH',
      'Torstraße 1',
      '10115 Berlin',
      'VAT ID: DE 123456789',
      account.email,
      // 1.25 GB of mobile at 8.00 per GB.
      'mobile bandwidth, 1.25 GB 10.00 USD',
      'Total 10.00 USD',
    ]) {
      expect(text).toContain(expected);
    }

    // Marked paid, the next download says so.
    expect((await admin(`/invoices/${invoice.id}/paid`, { method: 'POST' })).status).toBe(200);
    const paid = await textOf((await pdfOf(account.apiKey, invoice.id)).bytes);
    expect(paid).toMatch(/Status: Paid on \d{4}-\d\d-\d\d/);
  });

  test('without billing details the invoice names the account by its email', async () => {
    const account = await newAccount();
    const bought = await admin(`/accounts/${account.id}/purchases`, { body: { product: 'basic', gb: 3 } });
    const text = await textOf((await pdfOf(account.apiKey, bought.body.id)).bytes);
    expect(text).toContain(`Bill to\n${account.email}`);
    expect(text).toContain('Total 6.00 USD');
    expect(text).not.toContain('VAT ID');
  });

  test("another account's invoice, an unknown id and a malformed one are 404; no key is 401", async () => {
    const owner = await newAccount();
    const other = await newAccount();
    const bought = await admin(`/accounts/${owner.id}/purchases`, { body: { product: 'basic', gb: 1 } });
    for (const [key, id] of [
      [other.apiKey, bought.body.id],
      [owner.apiKey, '00000000-0000-4000-8000-000000000000'],
      [owner.apiKey, 'nope'],
    ]) {
      expect(await call(fx.api.url, `/api/v1/invoices/${id}/pdf`, { key })).toMatchObject({
        status: 404,
        body: { success: false, error: 'Invoice not found' },
      });
    }
    expect((await call(fx.api.url, `/api/v1/invoices/${bought.body.id}/pdf`)).status).toBe(401);
  });
});

describe('billing details', () => {
  test.each([
    [{ company: 'A', address: '', vatId: '' }, undefined],
    [{ company: 'x'.repeat(201), address: '', vatId: '' }, 'company: must be at most 200 characters'],
    [{ company: 'A\u0007', address: '', vatId: '' }, 'company: must not contain control characters'],
    [{ company: 'A', address: 'a\u001bb', vatId: '' }, 'address: must not contain control characters'],
    [{ company: 'a\ud800b', address: '', vatId: '' }, 'company: must be well-formed text'],
    [
      { company: 'A', address: '', vatId: 'DE<script>' },
      'vatId: must be letters, digits, spaces, dots or dashes',
    ],
    [{ company: 'A', address: '' }, 'vatId: is required'],
    [{ company: 'A', address: '', vatId: '', iban: 'x' }, 'iban: unknown field'],
  ])('%j', async (body, error) => {
    const account = await newAccount();
    const res = await call(fx.api.url, '/api/v1/billing-details', {
      key: account.apiKey,
      method: 'PUT',
      body,
    });
    if (error === undefined) expect(res.status).toBe(200);
    else
      expect(res).toMatchObject({
        status: 400,
        body: { success: false, error: `Invalid request: ${error}` },
      });
  });
});
