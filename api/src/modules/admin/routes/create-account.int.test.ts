// POST /admin/v1/accounts: the new account's key and credentials shown once, refusals, the token.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail } from '#test/fixtures.ts';
import { API_KEY_PATTERN } from '#common/secrets.ts';
import { call, useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

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
  test('only the admin token creates one', async () => {
    const account = await newAccount();
    const email = exampleEmail();
    await expectAdminOnly(fx, account.apiKey, 'POST', '/accounts', { email });
    expect((await admin(`/accounts?email=${encodeURIComponent(email)}`)).body.accounts).toEqual([]);
  });
});
