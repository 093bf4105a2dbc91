// Sub-users over the API (docs/adr/0037): create, list, read, change, delete as
// the customer and as the operator; every refusal with its message (unknown field, bad product,
// bounds, name and username clashes, the per-account cap, also when two creations race for the
// last place); isolation between accounts; usage per sub-user from the rows the worker's folding
// writes (inserted here directly); target statistics per sub-user; proxy strings with a sub-user's
// credentials. The API here runs with a cap of 3.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { lockWaiters } from '#test/db.ts';
import { until } from '#test/process.ts';
import { call, useTestApi } from '#test/api.ts';

const fx = useTestApi({ env: { PROXYFLEET_SUB_USERS_MAX: '3' } });

const create = (key: string, body: unknown) => call(fx.api.url, '/api/v1/sub-users', { key, body });
const patch = (key: string, id: string, body: unknown) =>
  call(fx.api.url, `/api/v1/sub-users/${id}`, { key, body, method: 'PATCH' });
const unique = () => `n${Math.random().toString(36).slice(2, 10)}`;
const noLimit = { limitGb: null, limitBytes: null, usedBytes: 0, usedGb: 0, requests: 0 };

describe('/api/v1/sub-users', () => {
  test('creates with generated credentials, lists, reads, changes and deletes', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const made = await create(a.apiKey, { name: 'Team A', trafficLimits: { basic: 1.5, mobile: 0 } });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      name: 'Team A',
      username: expect.stringMatching(/^[a-z0-9]{4,32}$/),
      password: expect.stringMatching(/^[A-Za-z0-9]{20}$/),
      status: 'active',
      maxConnections: null,
      bytesPerSecond: null,
    });
    expect(made.body.products).toEqual({
      light: noLimit,
      basic: { ...noLimit, limitGb: 1.5, limitBytes: 1_500_000_000 },
      advanced: noLimit,
      mobile: { ...noLimit, limitGb: 0, limitBytes: 0 },
      datacenter: noLimit,
    });
    const id = made.body.id as string;
    const username = unique();
    const second = await create(a.apiKey, {
      name: 'scraper-2',
      username,
      password: 'Secret12345',
      status: 'suspended',
      maxConnections: 10,
      bytesPerSecond: 65_536,
    });
    expect(second.body).toMatchObject({
      username,
      password: 'Secret12345',
      status: 'suspended',
      maxConnections: 10,
      bytesPerSecond: 65_536,
    });

    const list = await call(fx.api.url, '/api/v1/sub-users', { key: a.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.limit).toBe(3);
    expect(list.body.subUsers.map((s: { name: string }) => s.name)).toEqual(['Team A', 'scraper-2']);
    // The password can be read again, as the account's own proxy password can.
    const one = await call(fx.api.url, `/api/v1/sub-users/${id}`, { key: a.apiKey });
    expect(one.body).toEqual(made.body);

    // Limits merge per product; null removes one; other fields stay.
    const changed = await patch(a.apiKey, id, {
      trafficLimits: { basic: null, light: 2 },
      status: 'suspended',
      bytesPerSecond: 10_000_000_000,
    });
    expect(changed.status).toBe(200);
    expect(changed.body.products.basic).toEqual(noLimit);
    expect(changed.body.products.light).toMatchObject({ limitGb: 2, limitBytes: 2_000_000_000 });
    expect(changed.body.products.mobile).toMatchObject({ limitBytes: 0 });
    expect(changed.body).toMatchObject({
      name: 'Team A',
      status: 'suspended',
      bytesPerSecond: 10_000_000_000,
      password: made.body.password,
    });
    const reset = await patch(a.apiKey, id, { resetPassword: true, maxConnections: null, status: 'active' });
    expect(reset.body.password).toMatch(/^[A-Za-z0-9]{20}$/);
    expect(reset.body.password).not.toBe(made.body.password);
    expect(reset.body.status).toBe('active');
    const sealed = await fx.db.pool.query(
      'SELECT password_enc, password_sha256 FROM sub_users WHERE id = $1',
      [id],
    );
    expect(sealed.rows[0].password_enc.toString('utf8')).not.toContain(reset.body.password);
    expect(sealed.rows[0].password_sha256).toHaveLength(32);
    expect(await patch(a.apiKey, id, { username })).toMatchObject({
      status: 409,
      body: { error: 'This proxy username is taken; choose another' },
    });
    expect(await patch(a.apiKey, id, { name: 'scraper-2' })).toMatchObject({
      status: 409,
      body: { error: 'A sub-user with this name already exists' },
    });
    const renamed = await patch(a.apiKey, id, { name: 'Team B', username: unique() });
    expect(renamed.body).toMatchObject({ name: 'Team B', password: reset.body.password });

    const del = await call(fx.api.url, `/api/v1/sub-users/${id}`, { key: a.apiKey, method: 'DELETE' });
    expect(del.status).toBe(204);
    const again = await call(fx.api.url, `/api/v1/sub-users/${id}`, { key: a.apiKey, method: 'DELETE' });
    expect(again).toMatchObject({ status: 404, body: { error: 'Sub-user not found' } });
    expect(await call(fx.api.url, '/api/v1/sub-users/nope', { key: a.apiKey })).toMatchObject({
      status: 404,
      body: { error: 'Sub-user not found' },
    });
  });

  test.each([
    [{ name: 'x', port: 1 }, 'port: unknown field'],
    [{}, 'name: is required'],
    [
      { name: ' x' },
      'name: must be 1 to 64 letters, digits, spaces, dots, underscores or hyphens, starting with a letter or digit',
    ],
    [{ name: 'x', username: 'AB-c' }, 'username: must be 4 to 32 lowercase letters and digits'],
    [{ name: 'x', password: 'short' }, 'password: must be 8 to 128 letters and digits'],
    [{ name: 'x', password: 'with_underscore' }, 'password: must be 8 to 128 letters and digits'],
    [{ name: 'x', trafficLimits: { isp: 1 } }, 'trafficLimits.isp: unknown field'],
    [{ name: 'x', trafficLimits: { basic: -1 } }, 'trafficLimits.basic: must be at least 0'],
    [{ name: 'x', trafficLimits: { basic: 2_000_000 } }, 'trafficLimits.basic: must be at most 1000000'],
    [{ name: 'x', trafficLimits: { basic: '1' } }, 'trafficLimits.basic: must be a number'],
    [{ name: 'x', maxConnections: 0 }, 'maxConnections: must be at least 1'],
    [{ name: 'x', maxConnections: 100_001 }, 'maxConnections: must be at most 100000'],
    [{ name: 'x', bytesPerSecond: 65_535 }, 'bytesPerSecond: must be at least 65536'],
    [{ name: 'x', bytesPerSecond: 10_000_000_001 }, 'bytesPerSecond: must be at most 10000000000'],
    [{ name: 'x', status: 'paused' }, 'status: must be one of active, suspended'],
  ])('refuses %j', async (body, detail) => {
    const a = await accountWithBandwidth(fx.db.pool);
    expect(await create(a.apiKey, body)).toMatchObject({
      status: 400,
      body: { success: false, error: `Invalid request: ${detail}` },
    });
  });

  test('refuses a bad change, and a password with a reset', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'x' });
    expect(await patch(a.apiKey, body.id, { resetPassword: true, password: 'Abcdefgh1' })).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: resetPassword: must not be given with password' },
    });
    expect(await patch(a.apiKey, body.id, { nickname: 'y' })).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: nickname: unknown field' },
    });
  });

  test("a name is unique in the account; a username across every account's credentials and sub-users", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    expect((await create(a.apiKey, { name: 'same' })).status).toBe(201);
    expect(await create(a.apiKey, { name: 'same' })).toMatchObject({
      status: 409,
      body: { error: 'A sub-user with this name already exists' },
    });
    expect((await create(b.apiKey, { name: 'same' })).status).toBe(201);
    // b's own proxy username, asked for by a: refused without saying whose it is.
    const taken = { status: 409, body: { error: 'This proxy username is taken; choose another' } };
    expect(await create(a.apiKey, { name: 'other', username: b.proxyUsername })).toMatchObject(taken);
    const username = unique();
    expect((await create(b.apiKey, { name: 'mine', username })).status).toBe(201);
    expect(await create(a.apiKey, { name: 'theirs', username })).toMatchObject(taken);
    // And the other way round: a proxy credential cannot take a sub-user's name.
    await expect(
      fx.db.pool.query('UPDATE proxy_credentials SET username = $2 WHERE account_id = $1', [a.id, username]),
    ).rejects.toMatchObject({ constraint: 'proxy_username_taken' });
  });

  test('caps the sub-users of an account, also when two creations race for the last place', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    expect((await create(a.apiKey, { name: 'one' })).status).toBe(201);
    expect((await create(a.apiKey, { name: 'two' })).status).toBe(201);
    // Both creations are held at the account row until both wait there, so they overlap for sure;
    // without the lock each would count 2 and both would be created.
    const holder = await fx.db.pool.connect();
    let racing: Promise<Awaited<ReturnType<typeof create>>[]>;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [a.id]);
      let settled = false;
      racing = Promise.all([create(a.apiKey, { name: 'three' }), create(a.apiKey, { name: 'four' })]);
      void racing.finally(() => (settled = true));
      await until(
        async () => settled || (await lockWaiters(fx.db.pool)) >= 2,
        'both creations waiting for the account row',
      );
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    const raced = await racing;
    expect(raced.map((r) => r.status).sort()).toEqual([201, 409]);
    expect(raced.find((r) => r.status === 409)!.body.error).toBe('An account can have at most 3 sub-users');
    const { rows } = await fx.db.pool.query(
      'SELECT count(*)::int AS n FROM sub_users WHERE account_id = $1',
      [a.id],
    );
    expect(rows[0].n).toBe(3);
  });

  test("another account's key sees none of my sub-users", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool, { basic: 1e9 });
    const { body } = await create(a.apiKey, { name: 'private' });
    const notFound = { status: 404, body: { error: 'Sub-user not found' } };
    const path = `/api/v1/sub-users/${body.id}`;
    expect(await call(fx.api.url, path, { key: b.apiKey })).toMatchObject(notFound);
    expect(await patch(b.apiKey, body.id, { status: 'suspended' })).toMatchObject(notFound);
    expect(await call(fx.api.url, path, { key: b.apiKey, method: 'DELETE' })).toMatchObject(notFound);
    expect(await call(fx.api.url, `${path}/usage`, { key: b.apiKey })).toMatchObject(notFound);
    expect(
      await call(fx.api.url, `/api/v1/usage/targets?subUser=${body.id}`, { key: b.apiKey }),
    ).toMatchObject(notFound);
    expect(
      await call(fx.api.url, '/api/v1/proxies/generate', {
        key: b.apiKey,
        body: { provider: 'basic', country: 'us', sessionType: 'rotating', subUser: body.id },
      }),
    ).toMatchObject(notFound);
    expect((await call(fx.api.url, '/api/v1/sub-users', { key: b.apiKey })).body.subUsers).toEqual([]);
    expect((await call(fx.api.url, path, { key: a.apiKey })).body.status).toBe('active');
    expect((await call(fx.api.url, '/api/v1/sub-users', {})).status).toBe(401);
  });

  test("usage per sub-user: lifetime use per product in the sub-user, hours in /usage; the account's /usage unchanged", async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 5e9 });
    const { body: su } = await create(a.apiKey, { name: 'metered', trafficLimits: { basic: 1 } });
    const before = await call(fx.api.url, '/api/v1/usage', { key: a.apiKey });
    // What usage_fold writes from a gateway's sub-user lines.
    await fx.db.pool.query(
      `INSERT INTO sub_user_products (sub_user_id, account_id, product, used_bytes, requests_count)
       VALUES ($1, $2, 'basic', 300000000, 7), ($1, $2, 'mobile', 5, 1)
       ON CONFLICT (sub_user_id, product) DO UPDATE SET used_bytes = EXCLUDED.used_bytes,
                                                        requests_count = EXCLUDED.requests_count`,
      [su.id, a.id],
    );
    await fx.db.pool.query(
      `INSERT INTO sub_user_usage_hourly (sub_user_id, account_id, product, hour, bytes_up, bytes_down, requests)
       VALUES ($1, $2, 'basic', date_trunc('hour', now()) - interval '2 hours', 100, 1000, 3),
              ($1, $2, 'basic', date_trunc('hour', now()), 10, 20, 4),
              ($1, $2, 'mobile', date_trunc('hour', now()), 2, 3, 1),
              ($1, $2, 'basic', date_trunc('hour', now()) - interval '3 days', 7, 7, 7)`,
      [su.id, a.id],
    );
    const read = await call(fx.api.url, `/api/v1/sub-users/${su.id}`, { key: a.apiKey });
    expect(read.body.products.basic).toEqual({
      limitGb: 1,
      limitBytes: 1e9,
      usedBytes: 3e8,
      usedGb: 0.3,
      requests: 7,
    });
    expect(read.body.products.mobile).toEqual({ ...noLimit, usedBytes: 5, requests: 1 });

    const usage = await call(fx.api.url, `/api/v1/sub-users/${su.id}/usage?days=1`, { key: a.apiKey });
    expect(usage.status).toBe(200);
    expect(usage.body).toMatchObject({ success: true, subUserId: su.id });
    expect(usage.body.totals).toEqual([
      { product: 'basic', bytesUp: 110, bytesDown: 1020, requests: 7 },
      { product: 'mobile', bytesUp: 2, bytesDown: 3, requests: 1 },
    ]);
    expect(usage.body.hours).toHaveLength(3);
    expect(usage.body.hours[0]).toMatchObject({ product: 'basic', bytesUp: 100, bytesDown: 1000 });
    const week = await call(fx.api.url, `/api/v1/sub-users/${su.id}/usage`, { key: a.apiKey });
    expect(week.body.hours).toHaveLength(4);
    expect(
      await call(fx.api.url, `/api/v1/sub-users/${su.id}/usage?days=32`, { key: a.apiKey }),
    ).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: days: must be at most 31' },
    });
    // The account's own figures are the balances', untouched by the sub-user's rows.
    const after = await call(fx.api.url, '/api/v1/usage', { key: a.apiKey });
    expect(after.body.products).toEqual(before.body.products);
  });

  test("target statistics: the account's total by default, one sub-user's on request", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body: su } = await create(a.apiKey, { name: 'targets' });
    const today = new Date().toISOString().slice(0, 10);
    await fx.db.pool.query('SELECT target_usage_record($1::jsonb, 200)', [
      JSON.stringify([
        { account_id: a.id, product: 'basic', day: today, domain: 'example.com', bytes: 100, requests: 1 },
        {
          account_id: a.id,
          product: 'basic',
          day: today,
          sub_user: su.id,
          domain: 'example.com',
          bytes: 50,
          requests: 2,
        },
        {
          account_id: a.id,
          product: 'basic',
          day: today,
          sub_user: su.id,
          domain: 'example.org',
          bytes: 10,
          requests: 1,
        },
      ]),
    ]);
    const all = await call(fx.api.url, '/api/v1/usage/targets', { key: a.apiKey });
    expect(all.body.targets).toEqual([
      { domain: 'example.com', product: 'basic', bytes: 150, requests: 3 },
      { domain: 'example.org', product: 'basic', bytes: 10, requests: 1 },
    ]);
    const mine = await call(fx.api.url, `/api/v1/usage/targets?subUser=${su.id}`, { key: a.apiKey });
    expect(mine.body.targets).toEqual([
      { domain: 'example.com', product: 'basic', bytes: 50, requests: 2 },
      { domain: 'example.org', product: 'basic', bytes: 10, requests: 1 },
    ]);
    expect(await call(fx.api.url, '/api/v1/usage/targets?subUser=x', { key: a.apiKey })).toMatchObject({
      status: 400,
      body: { error: 'Invalid request: subUser: must be a sub-user id' },
    });
  });

  test("proxy strings with a sub-user's username and password", async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1e9, advanced: 1e9 });
    const { body: su } = await create(a.apiKey, { name: 'gen' });
    const gen = (body: object) =>
      call(fx.api.url, '/api/v1/proxies/generate', {
        key: a.apiKey,
        body: { country: 'us', sessionType: 'rotating', ...body },
      });
    const basic = await gen({ provider: 'basic', subUser: su.id });
    expect(basic.status).toBe(200);
    expect(basic.body.proxies[0]).toMatch(new RegExp(`:${su.username}:${su.password}_country-us$`));
    const advanced = await gen({ provider: 'advanced', subUser: su.id });
    expect(advanced.body.proxies[0]).toMatch(new RegExp(`:${su.username}-country-us:${su.password}$`));
    const own = await gen({ provider: 'basic' });
    expect(own.body.proxies[0]).toMatch(new RegExp(`:${a.proxyUsername}:${a.proxyPassword}_country-us$`));
    expect(await gen({ provider: 'basic', subUser: '00000000-0000-4000-8000-000000000000' })).toMatchObject({
      status: 404,
      body: { error: 'Sub-user not found' },
    });
  });

  test('the same as the operator, naming the account', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const admin = { admin: TEST_ADMIN_TOKEN };
    const path = `/admin/v1/accounts/${a.id}/sub-users`;
    const made = await call(fx.api.url, path, {
      ...admin,
      body: { name: 'ops', trafficLimits: { light: 3 } },
    });
    expect(made).toMatchObject({ status: 201, body: { name: 'ops', status: 'active' } });
    expect((await call(fx.api.url, path, admin)).body.subUsers).toHaveLength(1);
    const suspended = await call(fx.api.url, `${path}/${made.body.id}`, {
      ...admin,
      method: 'PATCH',
      body: { status: 'suspended' },
    });
    expect(suspended).toMatchObject({ status: 200, body: { status: 'suspended' } });
    expect((await call(fx.api.url, `/api/v1/sub-users/${made.body.id}`, { key: a.apiKey })).body.status).toBe(
      'suspended',
    );
    const resumed = await call(fx.api.url, `${path}/${made.body.id}`, {
      ...admin,
      method: 'PATCH',
      body: { status: 'active' },
    });
    expect(resumed.body.status).toBe('active');
    // Another account's sub-user is not reachable through this account's path.
    const b = await accountWithBandwidth(fx.db.pool);
    expect(
      await call(fx.api.url, `/admin/v1/accounts/${b.id}/sub-users/${made.body.id}`, {
        ...admin,
        method: 'DELETE',
      }),
    ).toMatchObject({ status: 404, body: { error: 'Sub-user not found' } });
    expect((await call(fx.api.url, `${path}/${made.body.id}`, { ...admin, method: 'DELETE' })).status).toBe(
      204,
    );
    expect((await call(fx.api.url, path, admin)).body.subUsers).toEqual([]);
    const missing = '/admin/v1/accounts/00000000-0000-4000-8000-000000000000/sub-users';
    expect(await call(fx.api.url, missing, admin)).toMatchObject({
      status: 404,
      body: { error: 'Account not found' },
    });
    expect(await call(fx.api.url, missing, { ...admin, body: { name: 'x' } })).toMatchObject({
      status: 404,
      body: { error: 'Account not found' },
    });
    expect((await call(fx.api.url, path, { key: a.apiKey })).status).toBe(401);
  });

  test('the OpenAPI document describes the routes, their body and their refusals', async () => {
    const doc = await call(fx.api.url, '/api/v1/openapi.json');
    const post = doc.body.paths['/api/v1/sub-users'].post;
    const body = post.requestBody.content['application/json'].schema;
    expect(Object.keys(body.properties).sort()).toEqual([
      'bytesPerSecond',
      'maxConnections',
      'name',
      'password',
      'status',
      'trafficLimits',
      'username',
    ]);
    expect(body.required).toEqual(['name']);
    expect(Object.keys(post.responses)).toEqual(expect.arrayContaining(['201', '400', '409']));
    const one = doc.body.paths['/api/v1/sub-users/{subUserId}'];
    expect(Object.keys(one).sort()).toEqual(['delete', 'get', 'patch']);
    expect(doc.body.paths['/api/v1/sub-users/{subUserId}/usage'].get).toBeDefined();
    expect(doc.body.paths['/admin/v1/accounts/{id}/sub-users/{subUserId}'].patch).toBeDefined();
  });
});
