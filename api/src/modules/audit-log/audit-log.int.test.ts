// The audit log end to end (docs/security.md "Audit log"): every audited change made through the
// API (actor api_key), the admin API (actor admin) and the auto-refill (actor system) leaves one
// entry with its actor, action and target, and no secret; the entry and its change commit or roll
// back together; the reads page newest first, and a key reads only its own account.
import { describe, expect, test } from '@jest/globals';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { encodeCursor } from './schemas.ts';

const fx = useTestApi();
const admin = (path: string, options: Parameters<typeof call>[2] = {}) =>
  call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });
const api = (key: string, path: string, options: Parameters<typeof call>[2] = {}) =>
  call(fx.api.url, `/api/v1${path}`, { key, ...options });

interface Account {
  id: string;
  email: string;
  apiKey: string;
  proxyPassword: string;
}

async function newAccount(): Promise<Account> {
  const res = await admin('/accounts', { body: { email: exampleEmail() } });
  expect(res.status).toBe(201);
  return res.body as Account;
}

interface Entry {
  id: string;
  at: string;
  actor: { kind: string; id: string; ip: string | null };
  action: string;
  target: { type: string; id: string } | null;
  details: Record<string, unknown>;
}

async function entries(account: Account): Promise<Entry[]> {
  const res = await admin(`/accounts/${account.id}/audit-log?limit=200`);
  expect(res.status).toBe(200);
  return (res.body as { entries: Entry[] }).entries;
}

/** The key id of the account's primary key (the api_key actor's id). */
async function primaryKeyId(account: Account): Promise<string> {
  const res = await admin(`/accounts/${account.id}/keys`);
  return (res.body.keys as { id: string; kind: string; revokedAt: string | null }[]).find(
    (k) => k.kind === 'primary' && !k.revokedAt,
  )!.id;
}

interface Case {
  action: string;
  by: 'api_key' | 'admin' | 'system';
  targetType: string | null;
  /** Makes the change (after `setup`); returns secrets the entry must not hold and the target id if known. */
  run: (a: Account) => Promise<{ secrets?: string[]; targetId?: string }>;
  details?: Record<string, unknown>;
}

/** A change that succeeded: its status is a success (the body shows in the failure message). */
const ok = (res: { status: number; body: any }) => {
  expect({ success: res.status >= 200 && res.status < 300, body: res.body }).toEqual({
    success: true,
    body: res.body,
  });
  return res;
};

const CASES: Case[] = [
  {
    action: 'api_key.created',
    by: 'admin',
    targetType: 'api_key',
    details: { name: 'ci' },
    run: async (a) => {
      const res = ok(await admin(`/accounts/${a.id}/keys`, { body: { name: 'ci' } }));
      return { secrets: [res.body.apiKey], targetId: res.body.id };
    },
  },
  {
    action: 'api_key.regenerated',
    by: 'admin',
    targetType: 'api_key',
    run: async (a) => {
      const res = ok(await admin(`/accounts/${a.id}/keys/primary/regenerate`, { method: 'POST' }));
      return { secrets: [res.body.apiKey, a.apiKey], targetId: res.body.id };
    },
  },
  {
    action: 'api_key.revoked',
    by: 'admin',
    targetType: 'api_key',
    details: { name: 'old' },
    run: async (a) => {
      const key = ok(await admin(`/accounts/${a.id}/keys`, { body: { name: 'old' } })).body;
      ok(await admin(`/accounts/${a.id}/keys/${key.id}`, { method: 'DELETE' }));
      return { secrets: [key.apiKey], targetId: key.id };
    },
  },
  {
    action: 'account.suspended',
    by: 'admin',
    targetType: 'account',
    details: { from: 'active', to: 'suspended' },
    run: async (a) => {
      ok(await admin(`/accounts/${a.id}/suspend`, { method: 'POST' }));
      return { targetId: a.id };
    },
  },
  {
    action: 'account.reactivated',
    by: 'admin',
    targetType: 'account',
    run: async (a) => {
      ok(await admin(`/accounts/${a.id}/suspend`, { method: 'POST' }));
      ok(await admin(`/accounts/${a.id}/reactivate`, { method: 'POST' }));
      return { targetId: a.id };
    },
  },
  {
    action: 'proxy_password.reset',
    by: 'admin',
    targetType: 'proxy_credentials',
    run: async (a) => {
      const res = ok(await admin(`/accounts/${a.id}/proxy-password/reset`, { method: 'POST' }));
      return { secrets: [res.body.proxyPassword, a.proxyPassword] };
    },
  },
  {
    action: 'alerts.updated',
    by: 'admin',
    targetType: 'account',
    details: { newInvoice: false },
    run: async (a) => {
      ok(await admin(`/accounts/${a.id}/alerts`, { method: 'PUT', body: { newInvoice: false } }));
      return { targetId: a.id };
    },
  },
  {
    action: 'auto_refill.updated',
    by: 'api_key',
    targetType: 'product',
    details: { enabled: true, thresholdGb: 1, refillGb: 5, maxRefillsPerMonth: 2 },
    run: async (a) => {
      const body = { enabled: true, thresholdGb: 1, refillGb: 5, maxRefillsPerMonth: 2 };
      ok(await api(a.apiKey, '/auto-refill/basic', { method: 'PUT', body }));
      return { targetId: 'basic', secrets: [a.apiKey] };
    },
  },
  {
    action: 'auto_refill.updated',
    by: 'admin',
    targetType: 'product',
    run: async (a) => {
      const body = { enabled: false, thresholdGb: 1, refillGb: 5 };
      ok(await admin(`/accounts/${a.id}/auto-refill/advanced`, { method: 'PUT', body }));
      return { targetId: 'advanced' };
    },
  },
  {
    action: 'purchase.created',
    by: 'admin',
    targetType: 'invoice',
    details: { product: 'basic', bytes: 500_000_000 },
    run: async (a) => {
      const res = ok(await admin(`/accounts/${a.id}/purchases`, { body: { product: 'basic', gb: 0.5 } }));
      return { targetId: res.body.id };
    },
  },
  {
    action: 'credit_limit.updated',
    by: 'admin',
    targetType: 'account',
    details: { limit: 2500 },
    run: async (a) => {
      ok(await admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: 2500 } }));
      return { targetId: a.id };
    },
  },
  {
    action: 'throttle.updated',
    by: 'admin',
    targetType: 'product',
    details: { product: 'basic', bytesPerSecond: 1_000_000 },
    run: async (a) => {
      const body = { bytesPerSecond: 1_000_000 };
      ok(await admin(`/accounts/${a.id}/throttle/basic`, { method: 'PUT', body }));
      return { targetId: 'basic' };
    },
  },
  {
    action: 'target_stats.updated',
    by: 'api_key',
    targetType: 'account',
    details: { enabled: false },
    run: async (a) => {
      ok(await api(a.apiKey, '/account/target-stats', { method: 'PUT', body: { enabled: false } }));
      return { targetId: a.id };
    },
  },
  {
    action: 'target_stats.updated',
    by: 'admin',
    targetType: 'account',
    details: { enabled: false },
    run: async (a) => {
      // Off: the default is on, and a switch set to what it is writes no entry.
      ok(await admin(`/accounts/${a.id}/target-stats`, { method: 'PUT', body: { enabled: false } }));
      return { targetId: a.id };
    },
  },
  {
    action: 'isp_proxy.added',
    by: 'admin',
    targetType: 'isp_proxy',
    details: { host: '203.0.113.7', port: 8000, username: 'isp1' },
    run: async (a) => {
      const body = {
        host: '203.0.113.7',
        port: 8000,
        username: 'isp1',
        password: 'isp-secret-1',
        country: 'us',
      };
      const res = ok(await admin(`/accounts/${a.id}/isp-proxies`, { body }));
      return { targetId: res.body.id, secrets: ['isp-secret-1'] };
    },
  },
  {
    action: 'isp_proxy.removed',
    by: 'admin',
    targetType: 'isp_proxy',
    details: { host: '203.0.113.8' },
    run: async (a) => {
      const body = {
        host: '203.0.113.8',
        port: 8000,
        username: 'isp2',
        password: 'isp-secret-2',
        country: 'us',
      };
      const res = ok(await admin(`/accounts/${a.id}/isp-proxies`, { body }));
      ok(await admin(`/accounts/${a.id}/isp-proxies/${res.body.id}`, { method: 'DELETE' }));
      return { targetId: res.body.id, secrets: ['isp-secret-2'] };
    },
  },
  {
    action: 'sub_user.created',
    by: 'api_key',
    targetType: 'sub_user',
    details: { name: 'team-a', passwordChanged: true },
    run: async (a) => {
      const body = { name: 'team-a', password: 'SubUserSecret123' };
      const res = ok(await api(a.apiKey, '/sub-users', { body }));
      return { targetId: res.body.id, secrets: ['SubUserSecret123', a.apiKey] };
    },
  },
  {
    action: 'sub_user.updated',
    by: 'api_key',
    targetType: 'sub_user',
    details: { status: 'suspended' },
    run: async (a) => {
      const created = ok(await api(a.apiKey, '/sub-users', { body: { name: 'team-b' } })).body;
      const res = ok(
        await api(a.apiKey, `/sub-users/${created.id}`, { method: 'PATCH', body: { status: 'suspended' } }),
      );
      return { targetId: created.id, secrets: [res.body.password] };
    },
  },
  {
    action: 'sub_user.updated',
    by: 'admin',
    targetType: 'sub_user',
    details: { passwordChanged: true },
    run: async (a) => {
      const created = ok(await api(a.apiKey, '/sub-users', { body: { name: 'team-c' } })).body;
      const body = { resetPassword: true };
      const res = ok(await admin(`/accounts/${a.id}/sub-users/${created.id}`, { method: 'PATCH', body }));
      return { targetId: created.id, secrets: [res.body.password, created.password] };
    },
  },
  {
    action: 'sub_user.deleted',
    by: 'admin',
    targetType: 'sub_user',
    details: { name: 'team-d' },
    run: async (a) => {
      const created = ok(await admin(`/accounts/${a.id}/sub-users`, { body: { name: 'team-d' } })).body;
      ok(await admin(`/accounts/${a.id}/sub-users/${created.id}`, { method: 'DELETE' }));
      return { targetId: created.id, secrets: [created.password] };
    },
  },
  {
    action: 'ip_allowlist.added',
    by: 'api_key',
    targetType: 'ip_allowlist_entry',
    details: { product: 'basic', cidr: '198.51.100.7/32' },
    run: async (a) => {
      const res = ok(
        await api(a.apiKey, '/ip-allowlist', { body: { product: 'basic', cidr: '198.51.100.7' } }),
      );
      return { targetId: res.body.id };
    },
  },
  {
    action: 'ip_allowlist.removed',
    by: 'admin',
    targetType: 'ip_allowlist_entry',
    details: { product: 'basic', cidr: '198.51.100.9/32' },
    run: async (a) => {
      const body = { product: 'basic', cidr: '198.51.100.9' };
      const res = ok(await admin(`/accounts/${a.id}/ip-allowlist`, { body }));
      ok(await admin(`/accounts/${a.id}/ip-allowlist/${res.body.id}`, { method: 'DELETE' }));
      return { targetId: res.body.id };
    },
  },
  {
    action: 'auto_refill.bought',
    by: 'system',
    targetType: 'invoice',
    details: { product: 'basic', bytes: 5_000_000_000, paymentMethod: 'invoice' },
    run: async (a) => {
      const body = { enabled: true, thresholdGb: 1, refillGb: 5, maxRefillsPerMonth: 2 };
      ok(await admin(`/accounts/${a.id}/auto-refill/basic`, { method: 'PUT', body }));
      const { rows } = await fx.db.pool.query<{ outcome: string }>(
        `SELECT billing_refill($1, 'basic', 1, 0) AS outcome`,
        [a.id],
      );
      expect(rows[0]!.outcome).toBe('bought');
      return {};
    },
  },
  {
    action: 'auto_refill.failed',
    by: 'system',
    targetType: 'auto_refill',
    details: { product: 'basic', paymentMethod: 'invoice' },
    run: async (a) => {
      const body = { enabled: true, thresholdGb: 1, refillGb: 5, maxRefillsPerMonth: 2 };
      ok(await admin(`/accounts/${a.id}/auto-refill/basic`, { method: 'PUT', body }));
      ok(await admin(`/accounts/${a.id}/credit-limit`, { method: 'PUT', body: { limit: 0 } }));
      const { rows } = await fx.db.pool.query<{ outcome: string }>(
        `SELECT billing_refill($1, 'basic', 1, 0) AS outcome`,
        [a.id],
      );
      expect(rows[0]!.outcome).toBe('credit_limit');
      return {};
    },
  },
];

describe('every audited change leaves its entry', () => {
  test.each(CASES.map((c) => [`${c.action} by ${c.by}`, c] as const))('%s', async (_name, c) => {
    const account = await newAccount();
    const before = await entries(account);
    const { secrets = [], targetId } = await c.run(account);
    const found = (await entries(account)).filter(
      (e) =>
        e.action === c.action &&
        e.actor.kind === c.by &&
        !before.some((b) => b.at === e.at && b.action === e.action),
    );
    expect(found).toHaveLength(1);
    const entry = found[0]!;
    const actorId = { api_key: await primaryKeyId(account), admin: 'admin-token', system: 'auto-refill' }[
      c.by
    ];
    // The regenerated primary key is a new key: the actor of that one case is admin anyway.
    expect(entry.actor).toEqual({ kind: c.by, id: actorId, ip: c.by === 'system' ? null : '127.0.0.1' });
    if (c.targetType === null) expect(entry.target).toBeNull();
    else expect(entry.target).toEqual({ type: c.targetType, id: targetId ?? expect.any(String) });
    if (c.details) expect(entry.details).toMatchObject(c.details);
    const text = JSON.stringify(entry);
    for (const secret of [...secrets, account.apiKey, account.proxyPassword])
      expect(text).not.toContain(secret);
    expect(text).not.toMatch(/svc_live_[0-9a-f]{10}|password"\s*:/i);
  });

  test('creating the account is its first entry', async () => {
    const account = await newAccount();
    const [created] = (await entries(account)).filter((e) => e.action === 'account.created');
    expect(created).toMatchObject({
      actor: { kind: 'admin', id: 'admin-token' },
      target: { type: 'account', id: account.id },
      details: { email: account.email },
    });
    expect(JSON.stringify(created)).not.toContain(account.apiKey);
  });

  test('an idempotent purchase retried records one entry', async () => {
    const account = await newAccount();
    const body = { product: 'basic', gb: 1, idempotencyKey: 'retry-1' };
    const first = ok(await admin(`/accounts/${account.id}/purchases`, { body }));
    const again = ok(await admin(`/accounts/${account.id}/purchases`, { body }));
    expect(again.body.id).toBe(first.body.id);
    expect((await entries(account)).filter((e) => e.action === 'purchase.created')).toHaveLength(1);
  });

  test('a refused change writes nothing', async () => {
    const account = await newAccount();
    const before = (await entries(account)).length;
    expect((await admin(`/accounts/${account.id}/keys`, { body: { name: '' } })).status).toBe(400);
    expect(
      (await api(account.apiKey, '/ip-allowlist/00000000-0000-4000-8000-000000000000', { method: 'DELETE' }))
        .status,
    ).toBe(404);
    expect(await entries(account)).toHaveLength(before);
  });
});

describe('the change and its entry commit or roll back together', () => {
  test('a failure after the entry is written (at commit) leaves neither the change nor the entry', async () => {
    const account = await newAccount();
    // Raises at commit, after both the allowlist row and its entry were written in the transaction.
    await fx.db.pool.query(`
      CREATE FUNCTION test_audit_boom() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'forced failure at commit'; END $$;
      CREATE CONSTRAINT TRIGGER test_audit_boom AFTER INSERT ON audit_log DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (NEW.details->>'cidr' = '192.0.2.66/32') EXECUTE FUNCTION test_audit_boom();`);
    try {
      const res = await api(account.apiKey, '/ip-allowlist', {
        body: { product: 'basic', cidr: '192.0.2.66' },
      });
      expect(res.status).toBe(500);
      const list = await api(account.apiKey, '/ip-allowlist');
      expect(list.body.entries).toEqual([]);
      expect((await entries(account)).filter((e) => e.action === 'ip_allowlist.added')).toEqual([]);
    } finally {
      await fx.db.pool.query('DROP TRIGGER test_audit_boom ON audit_log; DROP FUNCTION test_audit_boom()');
    }
  });

  test('a failing entry write undoes the change (a key is not created without its entry)', async () => {
    const account = await newAccount();
    await fx.db.pool.query(`
      CREATE FUNCTION test_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'forced failure of the audit write'; END $$;
      CREATE TRIGGER test_audit_refuse BEFORE INSERT ON audit_log
        FOR EACH ROW WHEN (NEW.details->>'name' = 'doomed') EXECUTE FUNCTION test_audit_refuse();`);
    try {
      expect((await admin(`/accounts/${account.id}/keys`, { body: { name: 'doomed' } })).status).toBe(500);
      const keys = (await admin(`/accounts/${account.id}/keys`)).body.keys as { name: string }[];
      expect(keys.map((k) => k.name)).toEqual(['primary']);
    } finally {
      await fx.db.pool.query(
        'DROP TRIGGER test_audit_refuse ON audit_log; DROP FUNCTION test_audit_refuse()',
      );
    }
  });
});

describe('reading the log', () => {
  async function accountWithEntries(n: number): Promise<Account> {
    const account = await newAccount();
    for (let i = 0; i < n; i++)
      ok(
        // Off, on, off...: each a change (the default is on; an unchanged switch writes no entry).
        await api(account.apiKey, '/account/target-stats', { method: 'PUT', body: { enabled: i % 2 === 1 } }),
      );
    return account;
  }

  test('GET /api/v1/audit-log pages newest first with an opaque cursor, as the admin route', async () => {
    // 12 entries, pages of 5: ids past 9 and 10 put a text order and a number order apart.
    const account = await accountWithEntries(11); // + account.created
    const seen: Entry[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const path: string = `/audit-log?limit=5${cursor ? `&cursor=${cursor}` : ''}`;
      const res = await api(account.apiKey, path);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['entries', 'nextCursor', 'success']);
      seen.push(...(res.body.entries as Entry[]));
      for (const e of res.body.entries as Entry[])
        expect(Object.keys(e).sort()).toEqual(['action', 'actor', 'at', 'details', 'id', 'target']);
      cursor = res.body.nextCursor as string | null;
      if (cursor) expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen.map((e) => e.action)).toEqual([...Array(11).fill('target_stats.updated'), 'account.created']);
    // Written with enabled = i % 2 === 1 for i = 0..10: newest first, 10 (false) down to 0 (false).
    expect(seen.slice(0, 11).map((e) => e.details.enabled)).toEqual(
      Array.from({ length: 11 }, (_, k) => (10 - k) % 2 === 1),
    );
    const times = seen.map((e) => Date.parse(e.at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    const ids = seen.map((e) => BigInt(e.id));
    expect([...ids].sort((a, b) => (a > b ? -1 : 1))).toEqual(ids); // newest (highest) first
    expect(await entries(account)).toEqual(seen);
  });

  test('limit defaults to 50 and is at most 200', async () => {
    const account = await accountWithEntries(0);
    expect((await api(account.apiKey, '/audit-log')).body.entries).toHaveLength(1);
    for (const limit of ['0', '201', 'x', '1.5'])
      expect(await api(account.apiKey, `/audit-log?limit=${limit}`)).toMatchObject({
        status: 400,
        body: { success: false, error: expect.stringMatching(/^Invalid request: limit: /) },
      });
    expect((await api(account.apiKey, '/audit-log?limit=200')).status).toBe(200);
    expect(await api(account.apiKey, '/audit-log?limt=5')).toMatchObject({
      status: 400,
      body: { success: false, error: 'Invalid request: limt: unknown field' },
    });
  });

  test('a cursor this API did not issue is 400 in the documented error format', async () => {
    const account = await accountWithEntries(0);
    for (const cursor of [
      'nope',
      '12',
      encodeURIComponent('a1:1'),
      Buffer.from('a1:-1').toString('base64url'),
      'x'.repeat(500),
    ]) {
      for (const res of [
        await api(account.apiKey, `/audit-log?cursor=${cursor}`),
        await admin(`/accounts/${account.id}/audit-log?cursor=${cursor}`),
      ])
        expect(res).toMatchObject({
          status: 400,
          body: { success: false, error: 'Invalid request: cursor: must be a nextCursor this API returned' },
        });
    }
    expect((await api(account.apiKey, `/audit-log?cursor=${encodeCursor('1')}`)).body).toEqual({
      success: true,
      entries: [],
      nextCursor: null,
    });
  });

  test("a key reads only its own account's log (IDOR)", async () => {
    const mine = await accountWithEntries(1);
    const theirs = await accountWithEntries(2);
    const theirCursor = (await admin(`/accounts/${theirs.id}/audit-log?limit=1`)).body.nextCursor as string;
    const res = await api(mine.apiKey, `/audit-log?cursor=${theirCursor}`);
    // Their cursor only says "older than id N": the answer is still my entries.
    for (const e of res.body.entries as Entry[]) expect(e.target?.id ?? mine.id).toBe(mine.id);
    const all = (await api(mine.apiKey, '/audit-log')).body.entries as Entry[];
    expect(all).toHaveLength(2);
    expect(JSON.stringify(all)).not.toContain(theirs.id);
    // No route takes another account's id with a customer key.
    expect((await api(mine.apiKey, `/accounts/${theirs.id}/audit-log`)).status).toBe(404);
    expect(
      (await call(fx.api.url, `/admin/v1/accounts/${theirs.id}/audit-log`, { key: mine.apiKey })).status,
    ).toBe(401);
    expect((await api('svc_live_' + '0'.repeat(48), '/audit-log')).status).toBe(401);
  });

  test('the OpenAPI document has both routes with limit and cursor, and the entry schema', async () => {
    const doc = (await call(fx.api.url, '/api/v1/openapi.json')).body;
    for (const path of ['/api/v1/audit-log', '/admin/v1/accounts/{id}/audit-log']) {
      const op = doc.paths[path]?.get;
      expect({ path, op: op !== undefined }).toEqual({ path, op: true });
      const query = (op.parameters as { name: string; in: string }[]).filter((p) => p.in === 'query');
      expect(query.map((p) => p.name)).toEqual(['limit', 'cursor']);
      expect(JSON.stringify(op.responses['200'])).toContain('nextCursor');
      expect(Object.keys(op.responses)).toContain('400');
    }
  });

  test('the admin route answers 404 for an account that does not exist', async () => {
    expect(await admin('/accounts/00000000-0000-4000-8000-000000000000/audit-log')).toMatchObject({
      status: 404,
      body: { success: false, error: 'Account not found' },
    });
    expect((await admin('/accounts/not-a-uuid/audit-log')).status).toBe(404);
  });
});
