// POST /admin/v1/accounts/:id/dashboard-invite: a one-time link, emailed and audited (never the
// link in the audit entry), an unknown account, the token.
import { describe, expect, test } from '@jest/globals';
import { useTestApi } from '#test/api.ts';
import { adminClient } from '#test/admin.ts';
import { expectAdminOnly } from '#test/route-auth.ts';

const fx = useTestApi();
const { admin, newAccount } = adminClient(fx);
const outbox = async (accountId: string) =>
  (await fx.db.pool.query('SELECT kind FROM email_outbox WHERE account_id = $1', [accountId])).rows;

describe('POST /admin/v1/accounts/:id/dashboard-invite', () => {
  test('answers a one-time link to set the password, emails it, and audits it without the link', async () => {
    const account = await newAccount();
    const res = await admin(`/accounts/${account.id}/dashboard-invite`, { method: 'POST' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      url: expect.stringMatching(/\/set-password\?token=\S+$/),
      expiresAt: expect.any(String),
    });
    expect(Date.parse(res.body.expiresAt)).toBeGreaterThan(Date.now());
    expect(await outbox(account.id)).toHaveLength(1);
    const { rows } = await fx.db.pool.query('SELECT * FROM audit_log WHERE account_id = $1 AND action = $2', [
      account.id,
      'password.invited',
    ]);
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(new URL(res.body.url).searchParams.get('token'));
  });
  test('an unknown or malformed account is 404', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      expect(await admin(`/accounts/${id}/dashboard-invite`, { method: 'POST' })).toMatchObject({
        status: 404,
        body: { error: 'Account not found' },
      });
    }
  });
  test('only the admin token invites', async () => {
    const account = await newAccount();
    await expectAdminOnly(fx, account.apiKey, 'POST', `/accounts/${account.id}/dashboard-invite`);
    expect(await outbox(account.id)).toEqual([]);
  });
});
