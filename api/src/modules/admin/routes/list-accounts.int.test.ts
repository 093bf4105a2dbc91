// GET /admin/v1/accounts: pages of accounts, by email, refusals, the token.
import { describe, expect, test } from '@jest/globals';
import { useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);

describe('GET /admin/v1/accounts', () => {
  test('lists accounts a page at a time, and those of one email', async () => {
    const a = await newAccount();
    const b = await newAccount();
    const all = await admin('/accounts?limit=500');
    expect(all.status).toBe(200);
    const ids = all.body.accounts.map((r: { id: string }) => r.id);
    expect(ids).toEqual(expect.arrayContaining([a.id, b.id]));
    expect((await admin('/accounts?limit=1')).body.accounts).toHaveLength(1);
    const page = await admin(`/accounts?limit=1&offset=${ids.length}`);
    expect(page.body.accounts).toEqual([]);
    const one = await admin(`/accounts?email=${encodeURIComponent(a.email)}`);
    expect(one.body.accounts).toEqual([
      { id: a.id, email: a.email, status: 'active', createdAt: expect.any(String) },
    ]);
  });
  test.each([
    ['limit=0', 'limit'],
    ['limit=501', 'limit'],
    ['offset=-1', 'offset'],
  ])('refuses ?%s with 400 naming %s', async (query, field) => {
    const res = await admin(`/accounts?${query}`);
    expect(res).toMatchObject({ status: 400, body: { success: false } });
    expect(res.body.error).toContain(field);
  });
  test.each([
    ['a NUL byte', '%00'],
    ['an email with a NUL byte', 'a%00b@example.test'],
  ])('refuses %s in ?email= with 400', async (_name, raw) => {
    const res = await admin(`/accounts?email=${raw}`);
    expect(res.status).toBe(400);
    // Refused before any route runs, like a NUL anywhere in a request (docs/security.md, "Malformed input").
    expect(res.body).toEqual({ success: false, error: 'Request contains a NUL character' });
  });
  test('only the admin token lists them', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'GET', '/accounts');
  });
});
