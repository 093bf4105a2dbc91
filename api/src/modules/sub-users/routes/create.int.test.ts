// POST /api/v1/sub-users: generated or chosen credentials, every refusal with its message, names
// and usernames unique, the per-account cap (also when two creations race for the last place),
// the key. The API here runs with a cap of 3.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { lockWaiters } from '#test/db.ts';
import { until } from '#test/process.ts';
import { useTestApi } from '#test/api.ts';
import { expectApiKeyOnly } from '#test/route-auth.ts';
import { noLimit, subUserClient, unique } from '#test/sub-users.ts';

const fx = useTestApi({ env: { PROXYFLEET_SUB_USERS_MAX: '3' } });
const { create } = subUserClient(fx);

describe('POST /api/v1/sub-users', () => {
  test('creates with generated credentials, or with those given', async () => {
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
    const sealed = await fx.db.pool.query(
      'SELECT password_enc, password_sha256 FROM sub_users WHERE id = $1',
      [second.body.id],
    );
    expect(sealed.rows[0].password_enc.toString('utf8')).not.toContain('Secret12345');
    expect(sealed.rows[0].password_sha256).toHaveLength(32);
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

  test('only an API key creates one', async () => {
    await expectApiKeyOnly(fx, 'POST', '/sub-users', { name: 'refused' });
    const { rows } = await fx.db.pool.query("SELECT 1 FROM sub_users WHERE name = 'refused'");
    expect(rows).toEqual([]);
  });
});
