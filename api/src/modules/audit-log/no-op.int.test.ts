// The audit log says only what happened (docs/security.md "Audit log"): the same change sent three
// times writes one entry, a change that changes nothing writes none, failed sign-ins from one
// address are one entry with a count, and the operator's dashboard invite is recorded.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { burst, rawFormPost, statusCounts } from '#test/burst.ts';
import { postForm, signedOutForm, STRONG, waitingForCode } from '#test/dashboard.ts';
import { twoFactorOn } from '#test/totp.ts';
import { hashPassword } from '#api/modules/dashboard/passwords.ts';

const fx = useTestApi({ env: { PROXYFLEET_API_TRUST_PROXY_HOPS: '1' } });
const admin = (path: string, options: Parameters<typeof call>[2] = {}) =>
  call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });
const api = (key: string, path: string, options: Parameters<typeof call>[2] = {}) =>
  call(fx.api.url, `/api/v1${path}`, { key, ...options });

interface Account {
  id: string;
  email: string;
  apiKey: string;
}

async function newAccount(): Promise<Account> {
  const res = await admin('/accounts', { body: { email: exampleEmail() } });
  expect(res.status).toBe(201);
  return res.body as Account;
}

interface Entry {
  action: string;
  actor: { kind: string; id: string; ip: string | null };
  details: Record<string, unknown>;
}

async function entries(a: Account, action: string): Promise<Entry[]> {
  const res = await admin(`/accounts/${a.id}/audit-log?limit=200`);
  expect(res.status).toBe(200);
  return (res.body as { entries: Entry[] }).entries.filter((e) => e.action === action);
}

/** Sends the same change three times (each must succeed): how many entries of `action` it wrote. */
async function thrice(a: Account, action: string, send: () => Promise<{ status: number }>): Promise<number> {
  for (let i = 0; i < 3; i++) expect((await send()).status).toBeLessThan(300);
  return (await entries(a, action)).length;
}

describe('audit log: no entry for a change that changed nothing', () => {
  const PUTS: [string, (a: Account) => Promise<{ status: number }>][] = [
    [
      'target_stats.updated',
      (a) => api(a.apiKey, '/account/target-stats', { method: 'PUT', body: { enabled: false } }),
    ],
    [
      'alerts.updated',
      (a) => admin(`/accounts/${a.id}/alerts`, { method: 'PUT', body: { newInvoice: false } }),
    ],
    [
      'auto_refill.updated',
      (a) =>
        api(a.apiKey, '/auto-refill/basic', {
          method: 'PUT',
          body: { enabled: true, thresholdGb: 1, refillGb: 5, maxRefillsPerMonth: 2 },
        }),
    ],
    [
      'credit_limit.updated',
      (a) => admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: 2500 } }),
    ],
    [
      'throttle.updated',
      (a) =>
        admin(`/accounts/${a.id}/throttle/basic`, { method: 'PUT', body: { bytesPerSecond: 1_000_000 } }),
    ],
    ['account.suspended', (a) => admin(`/accounts/${a.id}/suspend`, { method: 'POST' })],
  ];
  test.each(PUTS)('%s: the same change three times is one entry', async (action, send) => {
    const a = await newAccount();
    expect(await thrice(a, action, () => send(a))).toBe(1);
  });

  test('subscription.auto_renew_changed: renewal turned off three times is one entry', async () => {
    const a = await newAccount();
    const plan = await admin(`/accounts/${a.id}/subscriptions`, {
      body: { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 10 },
    });
    expect(plan.status).toBe(201);
    const id = (plan.body as { id: string }).id;
    const off = () => api(a.apiKey, `/subscriptions/${id}`, { method: 'PATCH', body: { autoRenew: false } });
    expect(await thrice(a, 'subscription.auto_renew_changed', off)).toBe(1);
  });

  test('sub_user.updated: the same settings three times is one entry', async () => {
    const a = await newAccount();
    const created = await api(a.apiKey, '/sub-users', { body: { name: 'team-a' } });
    expect(created.status).toBe(201);
    const id = (created.body as { id: string }).id;
    const body = { status: 'suspended', maxConnections: 5, trafficLimits: { basic: 2 } };
    const patch = () => api(a.apiKey, `/sub-users/${id}`, { method: 'PATCH', body });
    expect(await thrice(a, 'sub_user.updated', patch)).toBe(1);
  });

  test('two_factor.reset: a reset while two-factor is off writes nothing', async () => {
    const a = await newAccount();
    const reset = () => admin(`/accounts/${a.id}/two-factor/reset`, { method: 'POST' });
    expect(await thrice(a, 'two_factor.reset', reset)).toBe(0);
  });

  test('setting the default credit limit on an account that has it writes nothing', async () => {
    const a = await newAccount();
    const unset = () => admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: null } });
    expect(await thrice(a, 'credit_limit.updated', unset)).toBe(0);
  });
});

describe('audit log: failed sign-ins and the invite', () => {
  test('failed sign-ins from one address are one entry with their count; another address is another entry', async () => {
    const a = await newAccount();
    const form = await signedOutForm(fx.api.url);
    const fail = async (ip: string) => {
      const headers = { 'x-forwarded-for': ip };
      const res = await postForm(
        fx.api.url,
        '/sign-in',
        { _csrf: form.csrf, email: a.email, password: 'not it' },
        form.cookie,
        headers,
      );
      expect(res.status).toBe(401);
    };
    for (let i = 0; i < 3; i++) await fail('198.51.100.20');
    await fail('198.51.100.21');
    const failed = await entries(a, 'session.sign_in_failed');
    expect(failed.map((e) => [e.actor.ip, e.details.count])).toEqual([
      ['198.51.100.21', 1],
      ['198.51.100.20', 3],
    ]);
  });

  test('30 wrong sign-ins from one address released at once are one entry, counting those checked', async () => {
    const a = await newAccount();
    const form = await signedOutForm(fx.api.url);
    const requests = Array.from({ length: 30 }, (_, i) =>
      rawFormPost('/sign-in', { _csrf: form.csrf, email: a.email, password: `not it ${i}` }, form.cookie, {
        'x-forwarded-for': '198.51.100.30',
      }),
    );
    const counts = statusCounts(await burst(Number(new URL(fx.api.url).port), requests));
    // The email's throttle checks a few (429 for the rest, which record nothing); each checked one counts.
    expect(counts[401]).toBeGreaterThan(0);
    expect((counts[401] ?? 0) + (counts[429] ?? 0)).toBe(30);
    const failed = await entries(a, 'session.sign_in_failed');
    expect(failed.map((e) => [e.actor.ip, e.details.count])).toEqual([['198.51.100.30', counts[401]]]);
  });

  // Wrong codes need no scrypt: the checked ones finish together and their entries race for one row.
  // Three victims in one burst, each from its own address, so that the race is run three times.
  test('30 wrong two-factor codes from one address released at once are one entry, counting those checked', async () => {
    const victims = await Promise.all(
      [32, 33, 34].map(async (n) => {
        const a = await newAccount();
        await fx.db.pool.query(
          'INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, $2)',
          [a.id, await hashPassword(STRONG)],
        );
        await twoFactorOn(fx.db.pool, a.id);
        return { a, ip: `198.51.100.${n}`, waiting: await waitingForCode(fx.api.url, a.email) };
      }),
    );
    const requests = victims.flatMap(({ ip, waiting }) =>
      Array.from({ length: 30 }, (_, i) =>
        rawFormPost('/sign-in/code', { _csrf: waiting.csrf, code: String(100000 + i) }, waiting.cookie, {
          'x-forwarded-for': ip,
        }),
      ),
    );
    const answers = await burst(Number(new URL(fx.api.url).port), requests);
    for (const [v, { a, ip }] of victims.entries()) {
      const counts = statusCounts(answers.slice(v * 30, v * 30 + 30));
      expect(counts[401]).toBeGreaterThan(0);
      expect((counts[401] ?? 0) + (counts[429] ?? 0)).toBe(30);
      const failed = await entries(a, 'session.sign_in_failed');
      expect(failed.map((e) => [e.actor.ip, e.details.reason, e.details.count])).toEqual([
        [ip, 'second_factor', counts[401]],
      ]);
    }
  });

  test('the dashboard invite is recorded (never the link)', async () => {
    const a = await newAccount();
    const invite = await admin(`/accounts/${a.id}/dashboard-invite`, { method: 'POST' });
    expect(invite.status).toBe(201);
    const [entry, ...more] = await entries(a, 'password.invited');
    expect(more).toEqual([]);
    expect(entry).toMatchObject({ actor: { kind: 'admin' }, details: { expiresAt: expect.any(String) } });
    const token = new URL((invite.body as { url: string }).url).searchParams.get('token')!;
    expect(JSON.stringify(entry)).not.toContain(token);
  });
});
