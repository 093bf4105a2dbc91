// Sub-users seen by the other features (docs/adr/0037): target statistics per sub-user, proxy
// strings with a sub-user's credentials, neither for another account's sub-user, and the OpenAPI
// document of the routes. Each route's own tests are beside it in routes/.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { subUserClient } from '#test/sub-users.ts';

const fx = useTestApi();
const { create } = subUserClient(fx);

describe('sub-users in the other features', () => {
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

  test("another account's sub-user is in neither its target statistics nor its proxy strings", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool, { basic: 1e9 });
    const { body } = await create(a.apiKey, { name: 'private' });
    const notFound = { status: 404, body: { error: 'Sub-user not found' } };
    expect(
      await call(fx.api.url, `/api/v1/usage/targets?subUser=${body.id}`, { key: b.apiKey }),
    ).toMatchObject(notFound);
    expect(
      await call(fx.api.url, '/api/v1/proxies/generate', {
        key: b.apiKey,
        body: { provider: 'basic', country: 'us', sessionType: 'rotating', subUser: body.id },
      }),
    ).toMatchObject(notFound);
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
