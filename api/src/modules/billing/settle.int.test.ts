// Operators settle invoices (docs/adr/0101): paid and void, idempotent and final, audited; the
// credit limit counts only unpaid bill-later invoices; voiding takes back the unused bandwidth;
// the operators' list filters by status and exports CSV.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail } from '#test/fixtures.ts';
import { adminOf, call, newAccountVia, useTestApi } from '#test/api.ts';

const fx = useTestApi();
const admin = adminOf(fx);

const newAccount = () => newAccountVia(fx, exampleEmail());

async function buy(accountId: string, product: string, gb: number) {
  const res = await admin(`/accounts/${accountId}/purchases`, { body: { product, gb } });
  expect(res).toMatchObject({ status: 201, body: { status: 'issued', paidAt: null } });
  return res.body as { id: string; number: number; amountCents: number };
}

const post = (path: string) => admin(path, { method: 'POST' });

describe('marking invoices paid or void', () => {
  test('paid frees the credit limit; the same request again changes nothing; void after paid is 409', async () => {
    const account = await newAccount();
    expect(
      (await admin(`/accounts/${account.id}/credit-limit`, { method: 'PUT', body: { limit: 20 } })).status,
    ).toBe(200);
    // 10 GB of basic at 2.00 per GB: the whole month's limit.
    const invoice = await buy(account.id, 'basic', 10);
    const credit = async () => (await admin(`/accounts/${account.id}/credit-limit`)).body;
    expect(await credit()).toMatchObject({ limit: 20, usedThisMonth: 20, available: 0 });

    const paid = await post(`/invoices/${invoice.id}/paid`);
    expect(paid).toMatchObject({
      status: 200,
      body: { id: invoice.id, accountId: account.id, status: 'paid', voidedAt: null, amountCents: 2000 },
    });
    expect(Date.parse(paid.body.paidAt)).not.toBeNaN();
    // A paid invoice is no longer owed: the month's credit is free again.
    expect(await credit()).toMatchObject({ usedThisMonth: 0, available: 20 });

    const again = await post(`/invoices/${invoice.id}/paid`);
    expect(again).toMatchObject({ status: 200, body: { status: 'paid', paidAt: paid.body.paidAt } });
    expect(await post(`/invoices/${invoice.id}/void`)).toMatchObject({
      status: 409,
      body: { success: false, error: 'This invoice is already paid' },
    });

    const mine = await call(fx.api.url, '/api/v1/invoices', { key: account.apiKey });
    expect(mine.body.invoices[0]).toMatchObject({ id: invoice.id, status: 'paid', paidAt: paid.body.paidAt });

    const audit = await admin(`/accounts/${account.id}/audit-log`);
    const settled = audit.body.entries.filter((e: { action: string }) => e.action.startsWith('invoice.'));
    expect(settled).toEqual([
      expect.objectContaining({
        action: 'invoice.paid',
        actor: expect.objectContaining({ kind: 'admin' }),
        target: { type: 'invoice', id: invoice.id },
        details: { invoiceNumber: invoice.number, amountCents: 2000, currency: 'USD' },
      }),
    ]);
  });

  test('void takes back what is unused of the purchase, no more; paid after void is 409', async () => {
    const account = await newAccount();
    await buy(account.id, 'mobile', 1);
    const second = await buy(account.id, 'mobile', 2);
    // 2.5 GB of the 3 used: 0.5 GB of the voided invoice's 2 GB is unused.
    await fx.db.pool.query(
      `UPDATE balances SET used_bytes = 2500000000 WHERE account_id = $1 AND product = 'mobile'`,
      [account.id],
    );
    const voided = await post(`/invoices/${second.id}/void`);
    expect(voided).toMatchObject({
      status: 200,
      body: { status: 'void', paidAt: null, voidedBytes: 500_000_000 },
    });
    const { rows } = await fx.db.pool.query<{ total_bytes: number }>(
      `SELECT total_bytes FROM balances WHERE account_id = $1 AND product = 'mobile'`,
      [account.id],
    );
    expect(Number(rows[0]!.total_bytes)).toBe(2_500_000_000);
    const usage = await call(fx.api.url, '/api/v1/usage', { key: account.apiKey });
    expect(usage.body.products.mobile).toMatchObject({ remainingGb: 0 });
    // Voiding again takes nothing more.
    expect(await post(`/invoices/${second.id}/void`)).toMatchObject({
      status: 200,
      body: { status: 'void', voidedBytes: 500_000_000, voidedAt: voided.body.voidedAt },
    });
    expect(await post(`/invoices/${second.id}/paid`)).toMatchObject({
      status: 409,
      body: { error: 'This invoice is already void' },
    });
  });

  test.each([
    ['an unknown invoice', '/invoices/00000000-0000-4000-8000-000000000000/paid', 404, 'Invoice not found'],
    ['a malformed id', '/invoices/not-a-uuid/void', 404, 'Invoice not found'],
  ])('%s is 404 in the error format', async (_what, path, status, error) => {
    expect(await post(path)).toMatchObject({ status, body: { success: false, error } });
  });

  test('a customer key is refused; a body is refused', async () => {
    const account = await newAccount();
    const invoice = await buy(account.id, 'basic', 1);
    const res = await call(fx.api.url, `/admin/v1/invoices/${invoice.id}/paid`, {
      method: 'POST',
      key: account.apiKey,
    });
    expect(res.status).toBe(401);
    expect(await admin(`/invoices/${invoice.id}/paid`, { body: { force: true } })).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: force: unknown field' },
    });
  });
});

describe("the operators' invoice list", () => {
  test('filters by status and account, pages, and exports CSV with amounts in cents exactly', async () => {
    const account = await newAccount();
    const a = await buy(account.id, 'basic', 1);
    const b = await buy(account.id, 'light', 0.004);
    const c = await buy(account.id, 'basic', 3);
    await post(`/invoices/${a.id}/paid`);
    await post(`/invoices/${b.id}/void`);
    const list = async (q: string) => (await admin(`/invoices?accountId=${account.id}&${q}`)).body;
    expect((await list('')).invoices.map((i: { id: string }) => i.id)).toEqual([c.id, b.id, a.id]);
    expect((await list('status=issued')).invoices.map((i: { id: string }) => i.id)).toEqual([c.id]);
    expect((await list('status=paid')).invoices).toEqual([
      expect.objectContaining({ id: a.id, accountEmail: expect.any(String), settlement: 'deferred' }),
    ]);
    const page = await list('limit=2');
    expect(page.nextBefore).toBe(b.number);
    expect((await list(`before=${page.nextBefore}`)).invoices.map((i: { id: string }) => i.id)).toEqual([
      a.id,
    ]);

    const csv = await admin(`/invoices.csv?accountId=${account.id}`);
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const lines = (csv.body as string).trimEnd().split('\r\n');
    expect(lines[0]).toBe(
      'number,id,accountId,accountEmail,issuedAt,status,paidAt,voidedAt,source,product,bytes,amount,currency,' +
        'settlement,paymentMethod,description',
    );
    expect(lines).toHaveLength(4);
    const row = (id: string) => lines.find((l) => l.includes(id))!.split(',');
    expect(row(c.id).slice(5, 13)).toEqual([
      'issued',
      '',
      '',
      'purchase',
      'basic',
      '3000000000',
      '6.00',
      'USD',
    ]);
    // 0.004 GB of light rounds up to one cent (ADR 0091).
    expect(row(b.id)[11]).toBe('0.01');
    expect(row(b.id)[5]).toBe('void');

    for (const q of ['status=owed', 'accountId=nope', 'limit=0', 'limit=101', 'before=-1', 'colour=red']) {
      expect(await admin(`/invoices?${q}`)).toMatchObject({ status: 400, body: { success: false } });
    }
    expect((await admin('/invoices.csv?status=owed')).status).toBe(400);
  });
});
