// The IP allowlist over the API (docs/adr/0036): add, list, remove as the customer and as the
// operator; every refusal with its message: bad range, too wide, host bits, private addresses, bad
// targeting, the per-account cap, a duplicate, and a range another account owns (the database's
// exclusion constraint). The API here runs with PROXYFLEET_IP_ALLOWLIST_PRIVATE off (production's
// setting) and a cap of 3; documentation addresses (RFC 5737, RFC 3849) stand for public ones.
import { describe, expect, test } from '@jest/globals';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';

const fx = useTestApi({ env: { PROXYFLEET_IP_ALLOWLIST_MAX: '3' } });

const add = (key: string, body: unknown) => call(fx.api.url, '/api/v1/ip-allowlist', { key, body });

describe('/api/v1/ip-allowlist', () => {
  test('adds in canonical form, lists, and removes', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const one = await add(a.apiKey, {
      product: 'basic',
      cidr: '198.51.100.7',
      targeting: 'country-us_session-abc_lifetime-10m',
    });
    expect(one.status).toBe(201);
    expect(one.body).toMatchObject({
      product: 'basic',
      cidr: '198.51.100.7/32',
      targeting: 'country-us_session-abc_lifetime-10m',
    });
    const two = await add(a.apiKey, { product: 'advanced', cidr: '2001:0db8:0000::/48' });
    expect(two.body).toMatchObject({ cidr: '2001:db8::/48', targeting: null });
    const list = await call(fx.api.url, '/api/v1/ip-allowlist', { key: a.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.limit).toBe(3);
    expect(list.body.entries.map((e: { cidr: string }) => e.cidr)).toEqual([
      '198.51.100.7/32',
      '2001:db8::/48',
    ]);
    const del = await call(fx.api.url, `/api/v1/ip-allowlist/${one.body.id}`, {
      key: a.apiKey,
      method: 'DELETE',
    });
    expect(del.status).toBe(204);
    const again = await call(fx.api.url, `/api/v1/ip-allowlist/${one.body.id}`, {
      key: a.apiKey,
      method: 'DELETE',
    });
    expect(again).toMatchObject({ status: 404, body: { error: 'IP allowlist entry not found' } });
    // Another account cannot remove it.
    const b = await accountWithBandwidth(fx.db.pool);
    const theirs = await call(fx.api.url, `/api/v1/ip-allowlist/${two.body.id}`, {
      key: b.apiKey,
      method: 'DELETE',
    });
    expect(theirs.status).toBe(404);
    const notUuid = await call(fx.api.url, '/api/v1/ip-allowlist/nope', { key: a.apiKey, method: 'DELETE' });
    expect(notUuid.status).toBe(404);
  });

  test.each([
    [
      { product: 'basic', cidr: 'example.com' },
      'cidr: must be an IPv4 or IPv6 address, or a range such as 203.0.113.0/24',
    ],
    [{ product: 'basic', cidr: '198.51.100.0/23' }, 'cidr: must be no wider than /24 for IPv4'],
    [{ product: 'basic', cidr: '2001:db8::/47' }, 'cidr: must be no wider than /48 for IPv6'],
    [
      { product: 'basic', cidr: '198.51.100.9/24' },
      'cidr: must not have host bits set (the range is 198.51.100.0/24)',
    ],
    [{ product: 'basic', cidr: '198.51.100.1/40' }, 'cidr: must have a prefix length from 0 to 32'],
    [
      { product: 'basic', cidr: '::ffff:198.51.100.1' },
      'cidr: must write an IPv4 address as IPv4 (198.51.100.1)',
    ],
    [
      { product: 'basic', cidr: '127.0.0.1' },
      'cidr: must be a public address (private, loopback and reserved ranges are refused)',
    ],
    [
      { product: 'basic', cidr: '10.1.2.0/24' },
      'cidr: must be a public address (private, loopback and reserved ranges are refused)',
    ],
    [
      { product: 'basic', cidr: '198.51.100.1', targeting: 'session-abc' },
      'targeting: must be basic targeting such as country-us_session-abc123_lifetime-10m (targeting must start with country)',
    ],
    [
      { product: 'advanced', cidr: '198.51.100.1', targeting: 'country-us_session-abc' },
      'targeting: must be advanced targeting such as country-us-session-abc123-sessionduration-10 (targeting parameter out of place for this plan)',
    ],
    [
      { product: 'basic', cidr: '198.51.100.1', targeting: 'country-us_session-abc_lifetime-2000m' },
      'targeting: must be basic targeting such as country-us_session-abc123_lifetime-10m (session lifetime out of range)',
    ],
    [
      { product: 'isp', cidr: '198.51.100.1' },
      'product: must be one of light, basic, advanced, mobile, datacenter',
    ],
    [{ product: 'basic', cidr: '198.51.100.1', port: 1 }, 'port: unknown field'],
  ])('refuses %j', async (body, detail) => {
    const a = await accountWithBandwidth(fx.db.pool);
    const res = await add(a.apiKey, body);
    expect(res).toMatchObject({ status: 400, body: { success: false, error: `Invalid request: ${detail}` } });
  });

  test('caps the entries of an account, refuses a duplicate, and gives each address one owner per product', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    expect((await add(a.apiKey, { product: 'basic', cidr: '203.0.113.0/24' })).status).toBe(201);
    expect(await add(a.apiKey, { product: 'basic', cidr: '203.0.113.0/24' })).toMatchObject({
      status: 409,
      body: { error: 'This range is already in the allowlist for this product' },
    });
    // Inside a's /24: refused for b on the same product, allowed on another; a may nest its own.
    expect(await add(b.apiKey, { product: 'basic', cidr: '203.0.113.77' })).toMatchObject({
      status: 409,
      body: { error: "This range overlaps another account's allowlist for this product" },
    });
    expect((await add(b.apiKey, { product: 'mobile', cidr: '203.0.113.77' })).status).toBe(201);
    expect(
      (await add(a.apiKey, { product: 'basic', cidr: '203.0.113.77', targeting: 'country-de' })).status,
    ).toBe(201);
    expect((await add(a.apiKey, { product: 'light', cidr: '192.0.2.1' })).status).toBe(201);
    expect(await add(a.apiKey, { product: 'light', cidr: '192.0.2.2' })).toMatchObject({
      status: 409,
      body: { error: 'An account can have at most 3 IP allowlist entries' },
    });
  });

  test('two accounts adding overlapping ranges at once: exactly one gets it (the exclusion constraint)', async () => {
    for (let round = 0; round < 5; round++) {
      const [a, b] = await Promise.all([accountWithBandwidth(fx.db.pool), accountWithBandwidth(fx.db.pool)]);
      const answers = await Promise.all([
        add(a.apiKey, { product: 'datacenter', cidr: `203.0.${round}.0/24` }),
        add(b.apiKey, { product: 'datacenter', cidr: `203.0.${round}.9` }),
      ]);
      expect(answers.map((r) => r.status).sort()).toEqual([201, 409]);
    }
  });

  test('the same as the operator, naming the account', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const admin = { admin: TEST_ADMIN_TOKEN };
    const path = `/admin/v1/accounts/${a.id}/ip-allowlist`;
    const made = await call(fx.api.url, path, {
      ...admin,
      body: { product: 'datacenter', cidr: '192.0.2.128/25' },
    });
    expect(made).toMatchObject({ status: 201, body: { cidr: '192.0.2.128/25' } });
    const list = await call(fx.api.url, path, admin);
    expect(list.body.entries).toHaveLength(1);
    expect((await call(fx.api.url, '/api/v1/ip-allowlist', { key: a.apiKey })).body.entries).toHaveLength(1);
    expect((await call(fx.api.url, `${path}/${made.body.id}`, { ...admin, method: 'DELETE' })).status).toBe(
      204,
    );
    expect((await call(fx.api.url, path, admin)).body.entries).toEqual([]);
    const missing = `/admin/v1/accounts/00000000-0000-4000-8000-000000000000/ip-allowlist`;
    expect(await call(fx.api.url, missing, admin)).toMatchObject({
      status: 404,
      body: { error: 'Account not found' },
    });
    expect(
      await call(fx.api.url, missing, { ...admin, body: { product: 'basic', cidr: '192.0.2.1' } }),
    ).toMatchObject({ status: 404, body: { error: 'Account not found' } });
  });

  test('the OpenAPI document describes the routes, their body and their refusals', async () => {
    const doc = await call(fx.api.url, '/api/v1/openapi.json');
    expect(doc.status).toBe(200);
    const post = doc.body.paths['/api/v1/ip-allowlist'].post;
    const body = post.requestBody.content['application/json'].schema;
    expect(Object.keys(body.properties).sort()).toEqual(['cidr', 'product', 'targeting']);
    expect(body.required.sort()).toEqual(['cidr', 'product']);
    expect(Object.keys(post.responses).sort()).toEqual(expect.arrayContaining(['201', '400', '409']));
    expect(doc.body.paths['/api/v1/ip-allowlist'].get).toBeDefined();
    expect(doc.body.paths['/api/v1/ip-allowlist/{entryId}'].delete.responses['404']).toBeDefined();
    expect(doc.body.paths['/admin/v1/accounts/{id}/ip-allowlist'].post).toBeDefined();
  });
});
