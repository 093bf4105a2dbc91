// PATCH /api/v1/sub-users/:subUserId: limits merge per product, a new password, name and username
// clashes, refusals, another account's sub-user, the key.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectApiKeyOnly } from '#test/route-auth.ts';
import { noLimit, subUserClient, unique } from '#test/sub-users.ts';

const fx = useTestApi();
const { create, patch } = subUserClient(fx);

describe('PATCH /api/v1/sub-users/:subUserId', () => {
  test('limits merge per product (null removes one), other fields stay; a new password on request', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const made = await create(a.apiKey, { name: 'Team A', trafficLimits: { basic: 1.5, mobile: 0 } });
    const id = made.body.id as string;
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
    const sealed = await fx.db.pool.query('SELECT password_enc FROM sub_users WHERE id = $1', [id]);
    expect(sealed.rows[0].password_enc.toString('utf8')).not.toContain(reset.body.password);
    const renamed = await patch(a.apiKey, id, { name: 'Team B', username: unique() });
    expect(renamed.body).toMatchObject({ name: 'Team B', password: reset.body.password });
    expect((await call(fx.api.url, `/api/v1/sub-users/${id}`, { key: a.apiKey })).body).toEqual(renamed.body);
  });
  test("refuses another sub-user's name or username (409)", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const username = unique();
    await create(a.apiKey, { name: 'scraper-2', username });
    const { body } = await create(a.apiKey, { name: 'Team A' });
    expect(await patch(a.apiKey, body.id, { username })).toMatchObject({
      status: 409,
      body: { error: 'This proxy username is taken; choose another' },
    });
    expect(await patch(a.apiKey, body.id, { name: 'scraper-2' })).toMatchObject({
      status: 409,
      body: { error: 'A sub-user with this name already exists' },
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
  test("another account's sub-user is not changed", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'private' });
    expect(await patch(b.apiKey, body.id, { status: 'suspended' })).toMatchObject({
      status: 404,
      body: { error: 'Sub-user not found' },
    });
    expect((await call(fx.api.url, `/api/v1/sub-users/${body.id}`, { key: a.apiKey })).body.status).toBe(
      'active',
    );
  });
  test('only an API key changes one', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const { body } = await create(a.apiKey, { name: 'x' });
    await expectApiKeyOnly(fx, 'PATCH', `/sub-users/${body.id}`, { status: 'suspended' });
    expect((await call(fx.api.url, `/api/v1/sub-users/${body.id}`, { key: a.apiKey })).body.status).toBe(
      'active',
    );
  });
});
