import { describe, expect, test } from '@jest/globals';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { API_KEY_PATTERN } from '#common/secrets.ts';
import { call, useTestApi } from '#test/api.ts';

const fx = useTestApi();
const admin = (path: string, options: Parameters<typeof call>[2] = {}) =>
  call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });

async function newAccount() {
  const res = await admin('/accounts', { body: { email: exampleEmail() } });
  expect(res.status).toBe(201);
  return res.body as {
    id: string;
    email: string;
    status: string;
    apiKey: string;
    proxyUsername: string;
    proxyPassword: string;
  };
}

describe('POST /admin/v1/accounts', () => {
  test('creates an account with a primary key and proxy credentials, shown once', async () => {
    const email = exampleEmail();
    const res = await admin('/accounts', { body: { email } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual([
      'apiKey',
      'email',
      'id',
      'proxyPassword',
      'proxyUsername',
      'status',
    ]);
    expect(res.body).toMatchObject({ email, status: 'active' });
    expect(res.body.apiKey).toMatch(API_KEY_PATTERN);
    expect(res.body.proxyUsername).toMatch(/^[a-z0-9]{4,32}$/);
    expect(res.body.proxyPassword).toMatch(/^[A-Za-z0-9]+$/);
    expect((await call(fx.api.url, '/api/v1/account', { key: res.body.apiKey })).status).toBe(200);
    const listed = await admin(`/accounts?email=${encodeURIComponent(email)}`);
    expect(listed.body.accounts).toEqual([expect.objectContaining({ id: res.body.id, email })]);
  });
  test('refuses a duplicate email (409) and a malformed one (400)', async () => {
    const account = await newAccount();
    expect(await admin('/accounts', { body: { email: account.email.toUpperCase() } })).toMatchObject({
      status: 409,
      body: { success: false },
    });
    const bad = await admin('/accounts', { body: { email: 'not-an-email' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/email/);
  });
});

describe('GET /admin/v1/accounts', () => {
  test.each([
    ['a NUL byte', '%00'],
    ['an email with a NUL byte', 'a%00b@example.test'],
  ])('refuses %s in ?email= with 400', async (_name, raw) => {
    const res = await admin(`/accounts?email=${raw}`);
    expect(res.status).toBe(400);
    // Refused before any route runs, like a NUL anywhere in a request (docs/security.md, "Malformed input").
    expect(res.body).toEqual({ success: false, error: 'Request contains a NUL character' });
  });
});

describe('purchases', () => {
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
});

describe('keys', () => {
  test('regenerating the primary key stops the old one at once', async () => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}/keys/primary/regenerate`, { method: 'POST' });
    expect(res.status).toBe(200);
    expect(res.body.apiKey).toMatch(API_KEY_PATTERN);
    expect((await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).status).toBe(401);
    expect((await call(fx.api.url, '/api/v1/account', { key: res.body.apiKey })).status).toBe(200);
  });
  test('named keys: create, list without the key, revoke; the 11th active is refused', async () => {
    const account = await newAccount();
    const created = [];
    for (let i = 1; i <= 10; i++) {
      const res = await admin(`/accounts/${account.id}/keys`, { body: { name: `int-${i}` } });
      expect(res.status).toBe(201);
      expect(Object.keys(res.body).sort()).toEqual(['apiKey', 'id', 'name', 'prefix']);
      created.push(res.body as { id: string; apiKey: string });
    }
    const eleventh = await admin(`/accounts/${account.id}/keys`, { body: { name: 'int-11' } });
    expect(eleventh).toMatchObject({
      status: 409,
      body: { success: false, error: 'An account can have at most 10 named API keys' },
    });
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: 'int-1' } })).status).toBe(409);
    expect((await call(fx.api.url, '/api/v1/usage', { key: created[0]!.apiKey })).status).toBe(200);

    const del = await admin(`/accounts/${account.id}/keys/${created[0]!.id}`, { method: 'DELETE' });
    expect(del.status).toBe(204);
    expect((await call(fx.api.url, '/api/v1/usage', { key: created[0]!.apiKey })).status).toBe(401);
    expect((await admin(`/accounts/${account.id}/keys/${created[0]!.id}`, { method: 'DELETE' })).status).toBe(
      404,
    );
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: 'int-11' } })).status).toBe(201);

    const list = await admin(`/accounts/${account.id}/keys`);
    expect(list.body.keys).toHaveLength(12);
    expect(JSON.stringify(list.body)).not.toContain(created[1]!.apiKey);
    expect(list.body.keys.filter((k: { revokedAt: string | null }) => k.revokedAt)).toHaveLength(1);
  });
  test('the primary key cannot be revoked, only regenerated', async () => {
    const account = await newAccount();
    const keys = await admin(`/accounts/${account.id}/keys`);
    const primary = keys.body.keys.find((k: { kind: string }) => k.kind === 'primary');
    expect((await admin(`/accounts/${account.id}/keys/${primary.id}`, { method: 'DELETE' })).status).toBe(
      409,
    );
  });
  test('a key of another account cannot be revoked through this one', async () => {
    const a = await newAccount();
    const b = await newAccount();
    const key = await admin(`/accounts/${b.id}/keys`, { body: { name: 'x' } });
    expect((await admin(`/accounts/${a.id}/keys/${key.body.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await call(fx.api.url, '/api/v1/usage', { key: key.body.apiKey })).status).toBe(200);
  });
  test('a bad key name is 400', async () => {
    const account = await newAccount();
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: '' } })).status).toBe(400);
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: 'x'.repeat(65) } })).status).toBe(
      400,
    );
  });
});

describe('suspend and reactivate', () => {
  test('a suspended account is refused with 401 until reactivated', async () => {
    const account = await newAccount();
    expect((await call(fx.api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(200);
    expect(await admin(`/accounts/${account.id}/suspend`, { method: 'POST' })).toMatchObject({
      status: 200,
      body: { id: account.id, status: 'suspended' },
    });
    expect((await call(fx.api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(401);
    expect(await admin(`/accounts/${account.id}/reactivate`, { method: 'POST' })).toMatchObject({
      status: 200,
      body: { status: 'active' },
    });
    expect((await call(fx.api.url, '/api/v1/usage', { key: account.apiKey })).status).toBe(200);
  });
  test('an unknown account is 404', async () => {
    expect(
      (await admin('/accounts/00000000-0000-4000-8000-000000000000/suspend', { method: 'POST' })).status,
    ).toBe(404);
  });
});

describe('alerts and auto-refill', () => {
  test('toggles show in the account record at once', async () => {
    const account = await newAccount();
    expect((await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.alerts).toEqual({
      lowBandwidth: true,
      newInvoice: true,
      serverAlerts: false,
      lowBandwidthPercent: 10,
      lowBandwidthFloorGb: null,
    });
    const res = await admin(`/accounts/${account.id}/alerts`, {
      method: 'PUT',
      body: { lowBandwidth: false, newInvoice: false, serverAlerts: true },
    });
    expect(res.body).toEqual({
      lowBandwidth: false,
      newInvoice: false,
      serverAlerts: true,
      lowBandwidthPercent: 10,
      lowBandwidthFloorGb: null,
    });
    expect((await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.alerts).toMatchObject({
      lowBandwidth: false,
      serverAlerts: true,
    });
    const floor = await admin(`/accounts/${account.id}/alerts`, {
      method: 'PUT',
      body: { lowBandwidthFloorGb: 0.2 },
    });
    expect(floor.body).toMatchObject({
      lowBandwidth: false,
      lowBandwidthPercent: 10,
      lowBandwidthFloorGb: 0.2,
    });
    expect((await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.alerts).toMatchObject({
      lowBandwidthFloorGb: 0.2,
    });
    const cleared = await admin(`/accounts/${account.id}/alerts`, {
      method: 'PUT',
      body: { lowBandwidthFloorGb: null },
    });
    expect(cleared.body).toMatchObject({ lowBandwidthFloorGb: null });
    expect(
      (await admin(`/accounts/${account.id}/alerts`, { method: 'PUT', body: { lowBandwidthFloorGb: -1 } }))
        .status,
    ).toBe(400);
    expect((await admin(`/accounts/${account.id}/alerts`, { method: 'PUT', body: {} })).status).toBe(400);
    expect(
      (await admin(`/accounts/${account.id}/alerts`, { method: 'PUT', body: { serverAlerts: 'yes' } }))
        .status,
    ).toBe(400);

    const refill = await admin(`/accounts/${account.id}/auto-refill/basic`, {
      method: 'PUT',
      body: { enabled: true, thresholdGb: 0.5, refillGb: 5 },
    });
    expect(refill.status).toBe(200);
    expect((await call(fx.api.url, '/api/v1/account', { key: account.apiKey })).body.autoRefill).toEqual([
      { product: 'basic', enabled: true, thresholdGb: 0.5, refillGb: 5, maxRefillsPerMonth: 5 },
    ]);
  });
});

describe('ISP proxies and the proxy password', () => {
  test('assigned proxies appear in the customer list with credentials', async () => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}/isp-proxies`, {
      body: {
        host: '203.0.113.7',
        port: 8000,
        username: 'isp1',
        password: 'secret1',
        country: 'US',
        city: 'Dallas',
        isp: 'Example ISP',
      },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      host: '203.0.113.7',
      port: 8000,
      country: 'us',
      status: 'active',
      proxy: '203.0.113.7:8000:isp1:secret1',
    });
    expect(
      (
        await admin(`/accounts/${account.id}/isp-proxies`, {
          body: { host: '203.0.113.7', port: 8000, username: 'isp1', country: 'us' },
        })
      ).status,
    ).toBe(409);
    expect(
      (
        await admin(`/accounts/${account.id}/isp-proxies`, {
          body: { host: '203.0.113.8', port: 0, username: 'isp1', country: 'us' },
        })
      ).status,
    ).toBe(400);
    const generated = await admin(`/accounts/${account.id}/isp-proxies`, {
      body: {
        host: 'isp.example.com',
        port: 9000,
        username: 'isp2',
        country: 'de',
        expiresAt: '2020-01-01T00:00:00Z',
      },
    });
    expect(generated.body.password).toMatch(/^[A-Za-z0-9]{20}$/);
    const list = await call(fx.api.url, '/api/v1/proxies/list', { key: account.apiKey });
    expect(list.body.proxies).toHaveLength(2);
    expect(list.body.proxies[1]).toMatchObject({
      host: 'isp.example.com',
      status: 'expired',
      expiresAt: '2020-01-01T00:00:00.000Z',
    });
    expect(
      (await admin(`/accounts/${account.id}/isp-proxies/${res.body.id}`, { method: 'DELETE' })).status,
    ).toBe(204);
    expect(
      (await admin(`/accounts/${account.id}/isp-proxies/${res.body.id}`, { method: 'DELETE' })).status,
    ).toBe(404);
    expect((await admin(`/accounts/${account.id}/isp-proxies`)).body.proxies).toHaveLength(1);
  });
  test('resetting the proxy password changes generated proxies', async () => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}/proxy-password/reset`, { method: 'POST' });
    expect(res.body).toEqual({
      proxyUsername: account.proxyUsername,
      proxyPassword: expect.stringMatching(/^[A-Za-z0-9]+$/),
    });
    expect(res.body.proxyPassword).not.toBe(account.proxyPassword);
  });
  test('GET /admin/v1/accounts/:id shows the record without keys', async () => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}`);
    expect(res.body).toMatchObject({ id: account.id, email: account.email, status: 'active' });
    expect(JSON.stringify(res.body)).not.toContain(account.apiKey);
    expect((await admin('/accounts/00000000-0000-4000-8000-000000000000')).status).toBe(404);
  });
});
