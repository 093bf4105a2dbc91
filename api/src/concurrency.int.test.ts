// Every mutating /api/v1 and /admin/v1 route, raced over HTTP the way real clients race it: each
// case runs ROUNDS rounds of 2 to 11 calls sent at once (Promise.all) against one object, with
// identical bodies (same name, same key, same range) and with conflicting ones (create against
// delete, update against delete, regenerate against revoke, two purchases with one idempotency
// key, settings written twice). It proves that no answer is a 5xx (a deadlock, 40P01, or an
// unmapped unique violation answers 500), that every answer is a status the route documents for
// that situation, and the invariants: exactly one creation of a name wins, a cap is never passed,
// an idempotent purchase is bought once and plain purchases add up. The first test checks that the
// table covers every mutating route the router mounts (or RACED_ELSEWHERE names the suite that races
// it), so a new route needs a case here. The
// dashboard's form routes (cookie session and CSRF token) are left to its own suites.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { call, mountedRoutes, type CallOptions, useTestApi } from '#test/api.ts';
import { count, race, RACED_ELSEWHERE, runRace, type Race, type Racer } from '#test/races.ts';

const SUB_USERS_MAX = 3;
const ALLOWLIST_MAX = 3;
const fx = useTestApi({
  env: {
    PROXYFLEET_SUB_USERS_MAX: String(SUB_USERS_MAX),
    PROXYFLEET_IP_ALLOWLIST_MAX: String(ALLOWLIST_MAX),
    // Hundreds of calls per key within seconds: the rate limiter is not what is tested here.
    PROXYFLEET_RATE_LIMIT_PER_MINUTE: '1000000',
    PROXYFLEET_RATE_LIMIT_BURST: '100000',
  },
});

const GB = 1_000_000_000;
const api = (key: string, path: string, options: CallOptions = {}) =>
  call(fx.api.url, `/api/v1${path}`, { key, ...options });
const admin = (path: string, options: CallOptions = {}) =>
  call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });
const account = () => accountWithBandwidth(fx.db.pool, { basic: 10 * GB });
const unique = (label: string) => `${label}${Math.random().toString(36).slice(2, 10)}`;

const subUserCount = async (accountId: string) =>
  Number(
    (
      await fx.db.pool.query<{ n: string }>('SELECT count(*) AS n FROM sub_users WHERE account_id = $1', [
        accountId,
      ])
    ).rows[0]!.n,
  );

interface WithSubUser {
  a: NewAccount;
  subUserId: string;
}
const withSubUser = async (): Promise<WithSubUser> => {
  const a = await account();
  const made = await api(a.apiKey, '/sub-users', { body: { name: unique('s') } });
  if (made.status !== 201) throw new Error(`setup: sub-user ${made.status} ${JSON.stringify(made.body)}`);
  return { a, subUserId: made.body.id as string };
};

interface WithEntry {
  a: NewAccount;
  entryId: string;
  cidr: string;
}
/** A /64 of the documentation prefix 2001:db8::/32 per round and case, so rounds never overlap. */
let prefixes = 0;
const freshPrefix = () => `2001:db8:${(++prefixes).toString(16)}`;
const withEntry = async (): Promise<WithEntry> => {
  const a = await account();
  const cidr = `${freshPrefix()}::/64`;
  const made = await api(a.apiKey, '/ip-allowlist', { body: { product: 'basic', cidr } });
  if (made.status !== 201) throw new Error(`setup: entry ${made.status} ${JSON.stringify(made.body)}`);
  return { a, entryId: made.body.id as string, cidr };
};

const ispProxy = () => ({ host: '203.0.113.9', port: 8000, username: unique('u'), country: 'us' });
const autoRefill = (thresholdGb: number) => ({ enabled: true, thresholdGb, refillGb: thresholdGb + 5 });

const PLAN = { kind: 'bandwidth_plan', product: 'basic', gbPerPeriod: 10 };
const CASES: Race<unknown>[] = [
  // ---- sub-users ----
  race({
    name: 'sub-users: the same name created three times, once as the operator',
    covers: ['POST /api/v1/sub-users', 'POST /admin/v1/accounts/:id/sub-users'],
    setup: () => account(),
    racers: (a) => {
      const body = { name: 'same-name' };
      return [
        [[201, 409], () => api(a.apiKey, '/sub-users', { body })],
        [[201, 409], () => api(a.apiKey, '/sub-users', { body })],
        [[201, 409], () => admin(`/accounts/${a.id}/sub-users`, { body })],
      ];
    },
    check: async (a, results) => {
      expect(count(results, 201)).toBe(1);
      expect(await subUserCount(a.id)).toBe(1);
    },
  }),
  race({
    name: 'sub-users: four different names for the last places under the cap',
    covers: ['POST /api/v1/sub-users', 'POST /admin/v1/accounts/:id/sub-users'],
    setup: async () => (await withSubUser()).a,
    racers: (a) => [
      [[201, 409], () => api(a.apiKey, '/sub-users', { body: { name: unique('c') } })],
      [[201, 409], () => api(a.apiKey, '/sub-users', { body: { name: unique('c') } })],
      [[201, 409], () => admin(`/accounts/${a.id}/sub-users`, { body: { name: unique('c') } })],
      [[201, 409], () => admin(`/accounts/${a.id}/sub-users`, { body: { name: unique('c') } })],
    ],
    check: async (a, results) => {
      expect(count(results, 201)).toBe(SUB_USERS_MAX - 1);
      expect(await subUserCount(a.id)).toBe(SUB_USERS_MAX);
    },
  }),
  race({
    name: 'sub-users: updates against deletes, as the customer and as the operator',
    covers: [
      'PATCH /api/v1/sub-users/:subUserId',
      'DELETE /api/v1/sub-users/:subUserId',
      'PATCH /admin/v1/accounts/:id/sub-users/:subUserId',
      'DELETE /admin/v1/accounts/:id/sub-users/:subUserId',
    ],
    setup: withSubUser,
    racers: ({ a, subUserId }) => {
      const body = { name: 'renamed', trafficLimits: { basic: 1, mobile: 2 }, bytesPerSecond: 65_536 };
      return [
        [[200, 404], () => api(a.apiKey, `/sub-users/${subUserId}`, { method: 'PATCH', body })],
        [[204, 404], () => api(a.apiKey, `/sub-users/${subUserId}`, { method: 'DELETE' })],
        [
          [200, 404],
          () =>
            admin(`/accounts/${a.id}/sub-users/${subUserId}`, {
              method: 'PATCH',
              body: { status: 'suspended', trafficLimits: { basic: null, advanced: 3 } },
            }),
        ],
        [[204, 404], () => admin(`/accounts/${a.id}/sub-users/${subUserId}`, { method: 'DELETE' })],
      ];
    },
    check: async ({ a }, results) => {
      expect(count(results, 204)).toBe(1);
      expect(await subUserCount(a.id)).toBe(0);
    },
  }),
  race({
    name: 'sub-users: a rename (with a limit) to a new name against a creation of it',
    covers: ['PATCH /api/v1/sub-users/:subUserId', 'POST /api/v1/sub-users'],
    // The race of commit 55e0943 (a deadlock at the repo level); over HTTP its window is narrower:
    // without that fix, 3 runs of 40 rounds here did not hit it. Kept as the end-to-end guard.
    setup: withSubUser,
    racers: ({ a, subUserId }) => [
      [
        [200, 409],
        () =>
          api(a.apiKey, `/sub-users/${subUserId}`, {
            method: 'PATCH',
            body: { name: 'wanted', trafficLimits: { basic: 1 } },
          }),
      ],
      [[201, 409], () => api(a.apiKey, '/sub-users', { body: { name: 'wanted' } })],
    ],
    check: (_, results) => expect(results.filter((r) => r.status < 300)).toHaveLength(1),
  }),
  race({
    name: 'proxies: strings for a sub-user while it is deleted',
    covers: ['POST /api/v1/proxies/generate', 'DELETE /api/v1/sub-users/:subUserId'],
    setup: withSubUser,
    racers: ({ a, subUserId }) => {
      const body = { provider: 'basic', country: 'us', sessionType: 'sticky', count: 3, subUser: subUserId };
      return [
        [[200, 404], () => api(a.apiKey, '/proxies/generate', { body })],
        [[200, 404], () => api(a.apiKey, '/proxies/generate', { body })],
        [[204], () => api(a.apiKey, `/sub-users/${subUserId}`, { method: 'DELETE' })],
      ];
    },
  }),
  // ---- IP allowlist ----
  race({
    name: 'ip-allowlist: the same range added three times, once as the operator',
    covers: ['POST /api/v1/ip-allowlist', 'POST /admin/v1/accounts/:id/ip-allowlist'],
    setup: async () => ({ a: await account(), cidr: `${freshPrefix()}::/64` }),
    racers: ({ a, cidr }) => {
      const body = { product: 'basic', cidr };
      return [
        [[201, 409], () => api(a.apiKey, '/ip-allowlist', { body })],
        [[201, 409], () => api(a.apiKey, '/ip-allowlist', { body })],
        [[201, 409], () => admin(`/accounts/${a.id}/ip-allowlist`, { body })],
      ];
    },
    check: (_, results) => expect(count(results, 201)).toBe(1),
  }),
  race({
    name: 'ip-allowlist: six accounts add nested ranges of one prefix (migrations/0086)',
    covers: ['POST /api/v1/ip-allowlist'],
    // Without migrations/0086 this deadlocks (500) in one round of forty or so: more rounds and
    // six contenders make that near-certain.
    rounds: 60,
    setup: async () => ({
      accounts: await Promise.all([1, 2, 3, 4, 5, 6].map(() => account())),
      prefix: freshPrefix(),
    }),
    racers: ({ accounts, prefix }) =>
      ['::/48', '::/52', '::/56', '::/60', '::/64', '::1'].map((suffix, i): Racer => {
        const cidr = `${prefix}${suffix}`;
        return [
          [201, 409],
          () => api(accounts[i]!.apiKey, '/ip-allowlist', { body: { product: 'basic', cidr } }),
        ];
      }),
    check: (_, results) => expect(count(results, 201)).toBe(1),
  }),
  race({
    name: 'ip-allowlist: removals against an addition at the cap',
    covers: [
      'DELETE /api/v1/ip-allowlist/:entryId',
      'DELETE /admin/v1/accounts/:id/ip-allowlist/:entryId',
      'POST /api/v1/ip-allowlist',
    ],
    setup: async () => {
      const { a, entryId } = await withEntry();
      for (let i = 1; i < ALLOWLIST_MAX; i++)
        await api(a.apiKey, '/ip-allowlist', {
          body: { product: 'advanced', cidr: `${freshPrefix()}::/64` },
        });
      return { a, entryId, cidr: `${freshPrefix()}::/64` };
    },
    racers: ({ a, entryId, cidr }) => [
      [[204, 404], () => api(a.apiKey, `/ip-allowlist/${entryId}`, { method: 'DELETE' })],
      [[204, 404], () => admin(`/accounts/${a.id}/ip-allowlist/${entryId}`, { method: 'DELETE' })],
      [[201, 409], () => api(a.apiKey, '/ip-allowlist', { body: { product: 'basic', cidr } })],
    ],
    check: async ({ a }, results) => {
      expect(count(results, 204)).toBe(1);
      const list = await api(a.apiKey, '/ip-allowlist');
      expect(list.body.entries.length).toBeLessThanOrEqual(ALLOWLIST_MAX);
    },
  }),
  // ---- keys ----
  race({
    name: 'keys: the same name created three times',
    covers: ['POST /admin/v1/accounts/:id/keys'],
    setup: () => account(),
    racers: (a) =>
      [1, 2, 3].map((): Racer => [
        [201, 409],
        () => admin(`/accounts/${a.id}/keys`, { body: { name: 'ci' } }),
      ]),
    check: (_, results) => expect(count(results, 201)).toBe(1),
  }),
  race({
    name: 'keys: four names for the last two places under the cap of 10',
    covers: ['POST /admin/v1/accounts/:id/keys'],
    setup: async () => {
      const a = await account();
      for (let i = 0; i < 8; i++) await admin(`/accounts/${a.id}/keys`, { body: { name: `k${i}` } });
      return a;
    },
    racers: (a) =>
      [1, 2, 3, 4].map((i): Racer => [
        [201, 409],
        () => admin(`/accounts/${a.id}/keys`, { body: { name: `n${i}` } }),
      ]),
    check: async (a, results) => {
      expect(count(results, 201)).toBe(2);
      const keys = await admin(`/accounts/${a.id}/keys`);
      const active = keys.body.keys.filter((k: { revokedAt: string | null; name: string }) => !k.revokedAt);
      expect(active.length).toBe(11); // ten named and the primary
    },
  }),
  race({
    name: 'keys: regenerate the primary twice against revoking a named key twice and a creation',
    covers: [
      'POST /admin/v1/accounts/:id/keys/primary/regenerate',
      'DELETE /admin/v1/accounts/:id/keys/:keyId',
      'POST /admin/v1/accounts/:id/keys',
    ],
    setup: async () => {
      const a = await account();
      const named = await admin(`/accounts/${a.id}/keys`, { body: { name: 'old' } });
      return { a, keyId: named.body.id as string };
    },
    racers: ({ a, keyId }) => [
      [[200], () => admin(`/accounts/${a.id}/keys/primary/regenerate`, { method: 'POST' })],
      [[200], () => admin(`/accounts/${a.id}/keys/primary/regenerate`, { method: 'POST' })],
      [[204, 404], () => admin(`/accounts/${a.id}/keys/${keyId}`, { method: 'DELETE' })],
      [[204, 404], () => admin(`/accounts/${a.id}/keys/${keyId}`, { method: 'DELETE' })],
      [[201], () => admin(`/accounts/${a.id}/keys`, { body: { name: 'new' } })],
    ],
    check: async ({ a }, results) => {
      expect(count(results, 204)).toBe(1);
      // Exactly one of the two new primary keys works.
      const works = await Promise.all(
        results.slice(0, 2).map(async (r) => (await api(r.body.apiKey as string, '/account')).status),
      );
      expect(works.sort()).toEqual([200, 401]);
      expect((await api(a.apiKey, '/account')).status).toBe(401);
    },
  }),
  // ---- account state ----
  race({
    name: 'accounts: the same email created three times',
    covers: ['POST /admin/v1/accounts'],
    setup: async () => exampleEmail('race'),
    racers: (email) =>
      [1, 2, 3].map((): Racer => [[201, 409], () => admin('/accounts', { body: { email } })]),
    check: (_, results) => expect(count(results, 201)).toBe(1),
  }),
  race({
    name: 'accounts: suspend against reactivate against a password reset and an invite',
    covers: [
      'POST /admin/v1/accounts/:id/suspend',
      'POST /admin/v1/accounts/:id/reactivate',
      'POST /admin/v1/accounts/:id/proxy-password/reset',
      'POST /admin/v1/accounts/:id/dashboard-invite',
    ],
    setup: () => account(),
    racers: (a) => [
      [[200], () => admin(`/accounts/${a.id}/suspend`, { method: 'POST' })],
      [[200], () => admin(`/accounts/${a.id}/reactivate`, { method: 'POST' })],
      [[200], () => admin(`/accounts/${a.id}/suspend`, { method: 'POST' })],
      [[200], () => admin(`/accounts/${a.id}/proxy-password/reset`, { method: 'POST' })],
      [[200], () => admin(`/accounts/${a.id}/proxy-password/reset`, { method: 'POST' })],
      [[201], () => admin(`/accounts/${a.id}/dashboard-invite`, { method: 'POST' })],
      [[201], () => admin(`/accounts/${a.id}/dashboard-invite`, { method: 'POST' })],
    ],
  }),
  // ---- billing ----
  race({
    name: 'purchases: one idempotency key three times, and a different purchase under it',
    covers: ['POST /admin/v1/accounts/:id/purchases'],
    setup: async () => ({ a: await account(), key: unique('idem') }),
    racers: ({ a, key }) => {
      const body = { product: 'mobile', gb: 2, idempotencyKey: key };
      return [
        [[201, 422], () => admin(`/accounts/${a.id}/purchases`, { body })],
        [[201, 422], () => admin(`/accounts/${a.id}/purchases`, { body })],
        [[201, 422], () => admin(`/accounts/${a.id}/purchases`, { body: { ...body, gb: 3 } })],
        [[201], () => admin(`/accounts/${a.id}/purchases`, { body: { product: 'mobile', gb: 1 } })],
      ];
    },
    check: async ({ a }, results) => {
      // Either body may win the key: every keyed call with that body gets its one invoice, every
      // keyed call with the other body 422; the unkeyed purchase is a second invoice.
      const keyed = results.slice(0, 3);
      const winner = keyed.find((r) => r.status === 201)!;
      for (const r of keyed)
        if (r.status === 201) expect(r.body.id).toBe(winner.body.id);
        else expect(r.status).toBe(422);
      expect(count(keyed, 422)).toBe(winner.body.gb === 2 ? 1 : 2);
      expect(results[3]!.body.id).not.toBe(winner.body.id);
      const view = await admin(`/accounts/${a.id}`);
      expect(view.body.products.mobile.totalGb).toBe(winner.body.gb + 1);
    },
  }),
  race({
    name: 'credit limit: set twice, returned to the default, while purchases are billed against it',
    covers: ['PUT /admin/v1/accounts/:id/credit-limit'],
    setup: () => account(),
    racers: (a) => [
      [[200], () => admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: 10 } })],
      [[200], () => admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: 20 } })],
      [[200], () => admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: null } })],
      [[201], () => admin(`/accounts/${a.id}/purchases`, { body: { product: 'basic', gb: 1 } })],
    ],
    check: async (a) => {
      // One of the three won; the purchase is counted whatever the limit (never refused for it).
      const credit = (await admin(`/accounts/${a.id}/credit-limit`)).body;
      expect([10, 20, 1000]).toContain(credit.limit);
      expect(credit.default).toBe(credit.limit === 1000);
      const { invoices } = (await admin(`/accounts/${a.id}/invoices`)).body as {
        invoices: { amount: number }[];
      };
      expect(invoices.map((i) => i.amount)).toContain(2);
      expect(credit.usedThisMonth).toBe(invoices.reduce((sum, i) => sum + i.amount, 0));
    },
  }),
  race({
    name: 'auto-refill: settings put twice by the customer and twice by the operator',
    covers: ['PUT /api/v1/auto-refill/:product', 'PUT /admin/v1/accounts/:id/auto-refill/:product'],
    setup: () => account(),
    racers: (a) => [
      [[200], () => api(a.apiKey, '/auto-refill/basic', { method: 'PUT', body: autoRefill(1) })],
      [[200], () => api(a.apiKey, '/auto-refill/basic', { method: 'PUT', body: autoRefill(2) })],
      [[200], () => admin(`/accounts/${a.id}/auto-refill/basic`, { method: 'PUT', body: autoRefill(3) })],
      [[200], () => admin(`/accounts/${a.id}/auto-refill/basic`, { method: 'PUT', body: autoRefill(3) })],
    ],
    check: async (a) => {
      const now = await api(a.apiKey, '/auto-refill/basic');
      expect([1, 2, 3]).toContain(now.body.thresholdGb);
      expect(now.body.refillGb).toBe(now.body.thresholdGb + 5);
    },
  }),
  // ---- settings ----
  race({
    name: 'settings: alert toggles, throttle put and removed, target statistics on and off',
    covers: [
      'PUT /admin/v1/accounts/:id/alerts',
      'PUT /admin/v1/accounts/:id/throttle/:product',
      'PUT /api/v1/account/target-stats',
      'PUT /admin/v1/accounts/:id/target-stats',
    ],
    setup: () => account(),
    racers: (a) => [
      [[200], () => admin(`/accounts/${a.id}/alerts`, { method: 'PUT', body: { lowBandwidth: false } })],
      [
        [200],
        () =>
          admin(`/accounts/${a.id}/alerts`, {
            method: 'PUT',
            body: { lowBandwidth: true, newInvoice: false },
          }),
      ],
      [
        [200],
        () => admin(`/accounts/${a.id}/throttle/basic`, { method: 'PUT', body: { bytesPerSecond: 65_536 } }),
      ],
      [
        [200],
        () => admin(`/accounts/${a.id}/throttle/basic`, { method: 'PUT', body: { bytesPerSecond: null } }),
      ],
      [
        [200],
        () => admin(`/accounts/${a.id}/throttle/basic`, { method: 'PUT', body: { bytesPerSecond: 131_072 } }),
      ],
      [[200], () => api(a.apiKey, '/account/target-stats', { method: 'PUT', body: { enabled: false } })],
      [[200], () => admin(`/accounts/${a.id}/target-stats`, { method: 'PUT', body: { enabled: true } })],
    ],
  }),
  // ---- ISP proxies ----
  race({
    name: 'isp-proxies: the same proxy assigned twice against removing an assigned one twice',
    covers: ['POST /admin/v1/accounts/:id/isp-proxies', 'DELETE /admin/v1/accounts/:id/isp-proxies/:proxyId'],
    setup: async () => {
      const a = await account();
      const made = await admin(`/accounts/${a.id}/isp-proxies`, { body: ispProxy() });
      return { a, proxyId: made.body.id as string, fresh: ispProxy() };
    },
    racers: ({ a, proxyId, fresh }) => [
      [[201, 409], () => admin(`/accounts/${a.id}/isp-proxies`, { body: fresh })],
      [[201, 409], () => admin(`/accounts/${a.id}/isp-proxies`, { body: fresh })],
      [[204, 404], () => admin(`/accounts/${a.id}/isp-proxies/${proxyId}`, { method: 'DELETE' })],
      [[204, 404], () => admin(`/accounts/${a.id}/isp-proxies/${proxyId}`, { method: 'DELETE' })],
    ],
    check: (_, results) => {
      expect(count(results, 201)).toBe(1);
      expect(count(results, 204)).toBe(1);
    },
  }),
  // ---- one account, every kind of writer at once ----
  race({
    name: 'one account: a purchase, a suspension, keys, settings, a sub-user and an entry at once',
    covers: [],
    setup: withSubUser,
    racers: ({ a, subUserId }) => [
      [[201], () => admin(`/accounts/${a.id}/purchases`, { body: { product: 'basic', gb: 1 } })],
      [[200], () => admin(`/accounts/${a.id}/suspend`, { method: 'POST' })],
      [[200], () => admin(`/accounts/${a.id}/keys/primary/regenerate`, { method: 'POST' })],
      [[201], () => admin(`/accounts/${a.id}/keys`, { body: { name: 'mixed' } })],
      [
        [200],
        () => admin(`/accounts/${a.id}/throttle/basic`, { method: 'PUT', body: { bytesPerSecond: 65_536 } }),
      ],
      [[200], () => admin(`/accounts/${a.id}/auto-refill/basic`, { method: 'PUT', body: autoRefill(1) })],
      [[200], () => admin(`/accounts/${a.id}/proxy-password/reset`, { method: 'POST' })],
      [[201], () => admin(`/accounts/${a.id}/sub-users`, { body: { name: 'mixed' } })],
      [
        [200, 404],
        () =>
          admin(`/accounts/${a.id}/sub-users/${subUserId}`, {
            method: 'PATCH',
            body: { trafficLimits: { basic: 1 } },
          }),
      ],
      [[204], () => admin(`/accounts/${a.id}/sub-users/${subUserId}`, { method: 'DELETE' })],
      [
        [201],
        () =>
          admin(`/accounts/${a.id}/ip-allowlist`, {
            body: { product: 'basic', cidr: `${freshPrefix()}::/64` },
          }),
      ],
    ],
  }),
  // ---- subscriptions ----
  race({
    name: 'subscriptions: renewal turned off by the customer while the operator changes, cancels and adds one',
    covers: [
      'PATCH /api/v1/subscriptions/:subscriptionId',
      'POST /admin/v1/accounts/:id/subscriptions',
      'PATCH /admin/v1/accounts/:id/subscriptions/:subscriptionId',
      'POST /admin/v1/accounts/:id/subscriptions/:subscriptionId/cancel',
    ],
    setup: async () => {
      const a = await account();
      const created = await admin(`/accounts/${a.id}/subscriptions`, { body: PLAN });
      expect(created.status).toBe(201);
      return { a, id: (created.body as { id: string }).id };
    },
    racers: ({ a, id }) => {
      const [mine, theirs, plan] = [`/subscriptions/${id}`, `/accounts/${a.id}/subscriptions/${id}`, PLAN];
      return [
        [[200, 400, 409], () => api(a.apiKey, mine, { method: 'PATCH', body: { autoRenew: false } })],
        [[200, 400, 409], () => admin(theirs, { method: 'PATCH', body: { gbPerPeriod: 20 } })],
        [[200, 400, 409], () => admin(`${theirs}/cancel`, { method: 'POST' })],
        [[201], () => admin(`/accounts/${a.id}/subscriptions`, { body: plan })],
      ];
    },
    check: async ({ a, id }) => {
      const { rows } = await fx.db.pool.query<{ id: string; status: string; auto_renew: boolean }>(
        'SELECT id, status, auto_renew FROM subscriptions WHERE account_id = $1 ORDER BY id = $2 DESC',
        [a.id, id],
      );
      expect(rows.map((r) => [r.status, r.auto_renew])).toEqual([
        ['cancelled', false],
        ['active', true],
      ]);
    },
  }),
  // ---- two-factor sign-in ----
  race({
    name: "two-factor: an operator's reset sent twice at once on an account with it on",
    covers: ['POST /admin/v1/accounts/:id/two-factor/reset'],
    setup: async () => {
      const a = await account();
      await fx.db.pool.query(
        `INSERT INTO dashboard_two_factor (account_id, secret_enc, enabled_at, last_step) VALUES ($1, '\\x01', now(), 1)`,
        [a.id],
      );
      return a;
    },
    racers: (a) => [
      [[200], () => admin(`/accounts/${a.id}/two-factor/reset`, { method: 'POST' })],
      [[200], () => admin(`/accounts/${a.id}/two-factor/reset`, { method: 'POST' })],
    ],
    check: async (a, results) => {
      expect(results.map((r) => r.body.wasEnabled).sort()).toEqual([false, true]);
      const left = await fx.db.pool.query('SELECT 1 FROM dashboard_two_factor WHERE account_id = $1', [a.id]);
      expect(left.rowCount).toBe(0);
    },
  }),
];

describe('mutating routes raced over HTTP', () => {
  test('the table covers every mutating route the router mounts', () => {
    const mutating = mountedRoutes(fx.api.api.app).filter(
      (r) => !r.startsWith('GET ') && !r.startsWith('HEAD ') && !/ \/\//.test(r), // not the dashboard's
    );
    const covered = new Set([...CASES.flatMap((c) => c.covers), ...RACED_ELSEWHERE]);
    expect(mutating.filter((r) => !covered.has(r))).toEqual([]);
    expect(mutating.length).toBeGreaterThanOrEqual(28);
  });

  test.each(CASES.map((c) => [c.name, c] as const))('%s', async (_, c) => {
    expect(await runRace(c)).toEqual([]);
  });
});
