// POST /admin/v1/accounts/:id/purchases: exact bytes for fractional GB, the invoice, idempotency,
// refusals, the token.
import { describe, expect, test } from '@jest/globals';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('POST /admin/v1/accounts/:id/purchases', () => {
  test('fractional GB buys exact bytes and returns an invoice; usage shows it at once', async () => {
    const account = await newAccount();
    await call(fx.api.url, '/api/v1/usage', { key: account.apiKey }); // a snapshot exists before the purchase
    const res = await admin(`/accounts/${account.id}/purchases`, { body: { product: 'basic', gb: 0.5 } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      accountId: account.id,
      product: 'basic',
      bytes: 500_000_000,
      gb: 0.5,
      status: 'issued',
    });
    expect(res.body.number).toEqual(expect.any(Number));
    expect(res.headers.get('proxyfleet-cache-sync')).toBe('1/1');
    const usage = await call(fx.api.url, '/api/v1/usage', { key: account.apiKey });
    expect(usage.body.products.basic).toEqual({ totalGb: 0.5, usedGb: 0, remainingGb: 0.5 });
    const outbox = await fx.db.pool.query('SELECT kind FROM email_outbox WHERE account_id = $1', [
      account.id,
    ]);
    expect(outbox.rows).toEqual([{ kind: 'new_invoice' }]);
  });
  test('an idempotency key buys once', async () => {
    const account = await newAccount();
    const first = await admin(`/accounts/${account.id}/purchases`, {
      body: { product: 'light', gb: 1 },
      headers: { 'idempotency-key': `k-${account.id}` },
    });
    const again = await admin(`/accounts/${account.id}/purchases`, {
      body: { product: 'light', gb: 1 },
      headers: { 'idempotency-key': `k-${account.id}` },
    });
    expect(again.body.id).toBe(first.body.id);
    const { rows } = await fx.db.pool.query('SELECT total_bytes FROM balances WHERE account_id = $1', [
      account.id,
    ]);
    expect(rows).toEqual([{ total_bytes: 1e9 }]);
  });
  test('the same idempotency key with a different body is 422 and buys nothing', async () => {
    const account = await newAccount();
    const headers = { 'idempotency-key': `k2-${account.id}` };
    expect(
      (await admin(`/accounts/${account.id}/purchases`, { body: { product: 'light', gb: 1 }, headers }))
        .status,
    ).toBe(201);
    for (const body of [
      { product: 'light', gb: 2 },
      { product: 'basic', gb: 1 },
    ]) {
      const res = await admin(`/accounts/${account.id}/purchases`, { body, headers });
      expect(res).toMatchObject({
        status: 422,
        body: { success: false, error: 'This idempotency key was used for a different purchase' },
      });
    }
    const { rows } = await fx.db.pool.query(
      'SELECT product, total_bytes FROM balances WHERE account_id = $1',
      [account.id],
    );
    expect(rows).toEqual([{ product: 'light', total_bytes: 1e9 }]);
  });
  test.each([
    [{ product: 'gold', gb: 1 }, 'product'],
    [{ product: 'basic', gb: 0 }, 'gb'],
    [{ product: 'basic', gb: -1 }, 'gb'],
    [{ product: 'basic', gb: '1' }, 'gb'],
    [{ product: 'basic' }, 'gb'],
  ])('refuses %j (400 naming %s)', async (body, field) => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}/purchases`, { body });
    expect(res.status).toBe(400);
    expect(res.body.error).toContain(field);
  });
  test('unknown and malformed account ids are 404', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      const res = await admin(`/accounts/${id}/purchases`, { body: { product: 'basic', gb: 1 } });
      expect(res).toMatchObject({ status: 404, body: { success: false, error: 'Account not found' } });
    }
  });
  test('only the admin token buys', async () => {
    const account = await newAccount();
    const body = { product: 'basic', gb: 1 };
    await expectAdminOnly(fx, account.apiKey, 'POST', `/accounts/${account.id}/purchases`, body);
    const { rows } = await fx.db.pool.query('SELECT 1 FROM balances WHERE account_id = $1', [account.id]);
    expect(rows).toEqual([]);
  });
});
