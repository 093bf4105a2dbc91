import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { upsertGatewayEndpoint, DEFAULT_GATEWAY_PORTS } from '#common/gateway-endpoints.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';

let db: TestDatabase;
let api: TestApi;
let account: Awaited<ReturnType<typeof accountWithBandwidth>>;
const generate = (body: unknown, key = account.apiKey) =>
  call(api.url, '/api/v1/proxies/generate', { key, body });

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db, { env: { PROXYFLEET_PUBLIC_GATEWAY_HOST: 'gw.example.test' } });
  account = await accountWithBandwidth(db.pool, {
    light: 1e9,
    basic: 1e9,
    advanced: 1e9,
    mobile: 1e9,
    datacenter: 1e9,
  });
  await upsertGatewayEndpoint(
    db.pool,
    { plan: 'basic', host: 'basic.proxy.example.com', port: 12321, tls: true },
    'test',
  );
  await upsertGatewayEndpoint(
    db.pool,
    { plan: 'advanced', host: 'advanced.proxy.example.com', port: 61236 },
    'test',
  );
});
afterAll(async () => {
  await api.close();
  await db.drop();
});

describe('POST /api/v1/proxies/generate', () => {
  const u = () => account.proxyUsername;
  const p = () => account.proxyPassword;

  test('basic rotating: count identical lines on the advertised host and port', async () => {
    const res = await generate({ provider: 'basic', country: 'US', sessionType: 'rotating', count: 3 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      proxies: Array(3).fill(`basic.proxy.example.com:12321:${u()}:${p()}_country-us`),
    });
  });

  test('basic sticky: a fresh session id per proxy, state and city normalised, lifetime', async () => {
    const res = await generate({
      provider: 'basic',
      country: 'us',
      sessionType: 'sticky',
      count: 50,
      state: 'North Carolina',
      city: 'Winston-Salem',
      lifetime: 30,
    });
    const pattern = new RegExp(
      `^basic\\.proxy\\.example\\.com:12321:${u()}:${p()}_country-us_state-northcarolina-city-winstonsalem_session-([a-z0-9]{10})_lifetime-30m$`,
    );
    const sessions = (res.body.proxies as string[]).map((line) => pattern.exec(line)?.[1]);
    expect(sessions.every(Boolean)).toBe(true);
    expect(new Set(sessions).size).toBe(50);
  });

  test('advanced sticky: targeting in the username, sessionduration', async () => {
    const res = await generate({
      provider: 'advanced',
      country: 'de',
      sessionType: 'sticky',
      count: 1,
      sessionDuration: 15,
    });
    expect(res.body.proxies[0]).toMatch(
      new RegExp(
        `^advanced\\.proxy\\.example\\.com:61236:${u()}-country-de-session-[a-z0-9]{10}-sessionduration-15:${p()}$`,
      ),
    );
  });

  test('plans without a gateway_endpoints row use PROXYFLEET_PUBLIC_GATEWAY_HOST and the default port', async () => {
    const light = await generate({ provider: 'light', country: 'gb', sessionType: 'rotating', count: 1 });
    expect(light.body.proxies).toEqual([
      `gw.example.test:${DEFAULT_GATEWAY_PORTS.light}:${u()}:${p()}_country-gb`,
    ]);
    const mobile = await generate({
      provider: 'mobile',
      country: 'us',
      sessionType: 'rotating',
      count: 1,
      state: 'ohio',
    });
    expect(mobile.body.proxies).toEqual([
      `gw.example.test:${DEFAULT_GATEWAY_PORTS.mobile}:${u()}-country-us-state-ohio:${p()}`,
    ]);
    const dc = await generate({ provider: 'datacenter', country: 'fr', sessionType: 'rotating', count: 1 });
    expect(dc.body.proxies).toEqual([
      `gw.example.test:${DEFAULT_GATEWAY_PORTS.datacenter}:${u()}:${p()}_country-fr`,
    ]);
  });

  test('city and state names in Unicode letters are accepted, folded to the ASCII the gateways read', async () => {
    const res = await generate({
      provider: 'basic',
      country: 'br',
      sessionType: 'rotating',
      count: 1,
      state: 'São Paulo',
      city: 'São Paulo',
    });
    expect(res.status).toBe(200);
    expect(res.body.proxies).toEqual([
      `basic.proxy.example.com:12321:${u()}:${p()}_country-br_state-saopaulo-city-saopaulo`,
    ]);
    const more = await generate({
      provider: 'light',
      country: 'ch',
      sessionType: 'rotating',
      count: 1,
      state: 'Zürich',
      city: 'Küssnacht am Rigi',
    });
    expect(more.body.proxies[0]).toMatch(/_country-ch_state-zurich-city-kussnachtamrigi$/);
    const de = await generate({
      provider: 'light',
      country: 'de',
      sessionType: 'rotating',
      count: 1,
      state: 'Thüringen',
      city: 'Weißensee',
    });
    expect(de.body.proxies[0]).toMatch(/_state-thuringen-city-weissensee$/);
  });

  test('scheme: the same proxies also as URLs, in order, that parse back to the same credentials', async () => {
    const res = await generate({
      provider: 'basic',
      country: 'us',
      sessionType: 'sticky',
      count: 3,
      lifetime: 30,
      scheme: 'https',
    });
    expect(res.status).toBe(200);
    const { proxies, urls } = res.body as { proxies: string[]; urls: string[] };
    expect(urls).toHaveLength(3);
    urls.forEach((raw, i) => {
      const url = new URL(raw);
      const [host, port, username, password] = proxies[i]!.split(':');
      expect([url.protocol, url.hostname, url.port]).toEqual(['https:', host, port]);
      expect([decodeURIComponent(url.username), decodeURIComponent(url.password)]).toEqual([
        username,
        password,
      ]);
    });
    expect(urls[0]).toMatch(
      new RegExp(
        `^https://${u()}:${p()}_country-us_session-[a-z0-9]{10}_lifetime-30m@basic\\.proxy\\.example\\.com:12321$`,
      ),
    );
    const plain = await generate({
      provider: 'advanced',
      country: 'de',
      sessionType: 'rotating',
      scheme: 'http',
    });
    expect(plain.body).toEqual({
      success: true,
      proxies: [`advanced.proxy.example.com:61236:${u()}-country-de:${p()}`],
      urls: [`http://${u()}-country-de:${p()}@advanced.proxy.example.com:61236`],
    });
  });

  test('409 TLS_NOT_SERVED for https where the plan has no TLS (no tls on its endpoint, or no endpoint); http still answers', async () => {
    for (const provider of ['advanced', 'light'] as const) {
      const res = await generate({ provider, country: 'us', sessionType: 'rotating', scheme: 'https' });
      expect(res).toMatchObject({
        status: 409,
        body: {
          success: false,
          error: `No TLS is served for ${provider}; use scheme http`,
        },
      });
    }
    const http = await generate({
      provider: 'light',
      country: 'us',
      sessionType: 'rotating',
      scheme: 'http',
    });
    expect(http.status).toBe(200);
    expect((http.body as { urls: string[] }).urls[0]).toMatch(/^http:\/\/.*@gw\.example\.test:10080$/);
    // The operator turns TLS on for the plan: the same request is answered.
    await upsertGatewayEndpoint(
      db.pool,
      { plan: 'advanced', host: 'advanced.proxy.example.com', port: 61236, tls: true },
      'test',
    );
    const now = await generate({
      provider: 'advanced',
      country: 'us',
      sessionType: 'rotating',
      scheme: 'https',
    });
    expect(now.status).toBe(200);
    expect((now.body as { urls: string[] }).urls[0]).toMatch(
      /^https:\/\/.*@advanced\.proxy\.example\.com:61236$/,
    );
    await upsertGatewayEndpoint(
      db.pool,
      { plan: 'advanced', host: 'advanced.proxy.example.com', port: 61236 },
      'test',
    );
  });

  test('a plan refusing credentials in clear: only https:// is handed out (409 CLEAR_CREDENTIALS_REFUSED for http)', async () => {
    const advanced = { plan: 'advanced', host: 'advanced.proxy.example.com', port: 61236 } as const;
    await upsertGatewayEndpoint(db.pool, { ...advanced, tls: true, refuseCredentialsInClear: true }, 'test');
    try {
      const ask = (scheme: 'http' | 'https') =>
        generate({ provider: 'advanced', country: 'us', sessionType: 'rotating', scheme });
      expect(await ask('http')).toMatchObject({
        status: 409,
        body: {
          success: false,
          error: 'The advanced plan refuses credentials sent in clear; use scheme https',
        },
      });
      const https = await ask('https');
      expect(https.status).toBe(200);
      expect((https.body as { urls: string[] }).urls[0]).toMatch(
        /^https:\/\/.*@advanced\.proxy\.example\.com:61236$/,
      );
      // Only a plan that serves TLS can refuse credentials in clear (its gateways do not start otherwise).
      await expect(
        upsertGatewayEndpoint(db.pool, { ...advanced, tls: false, refuseCredentialsInClear: true }, 'test'),
      ).rejects.toThrow(/gateway_endpoints_refuse_needs_tls/);
    } finally {
      await upsertGatewayEndpoint(db.pool, advanced, 'test');
    }
  });

  test('the OpenAPI document describes scheme and urls', async () => {
    const doc = (await call(api.url, '/api/v1/openapi.json')).body;
    const op = doc.paths['/api/v1/proxies/generate'].post;
    expect(op.requestBody.content['application/json'].schema.properties.scheme.enum).toEqual([
      'http',
      'https',
      'socks5h',
    ]);
    const ok = op.responses['200'].content['application/json'].schema;
    expect(ok.properties.urls.type).toBe('array');
    expect(ok.required).not.toContain('urls');
  });

  test('the maximum count is accepted', async () => {
    const res = await generate({ provider: 'basic', country: 'us', sessionType: 'sticky', count: 1000 });
    expect(res.body.proxies).toHaveLength(1000);
  });

  test('403 with the spec message when the plan has no bandwidth (never bought, or used up)', async () => {
    const poor = await accountWithBandwidth(db.pool, { light: 1e9 });
    const res = await generate(
      { provider: 'basic', country: 'us', sessionType: 'rotating', count: 1 },
      poor.apiKey,
    );
    expect(res).toMatchObject({
      status: 403,
      body: { success: false, error: 'No basic bandwidth purchased. Buy basic bandwidth first.' },
    });
    await db.pool.query(`UPDATE balances SET used_bytes = total_bytes WHERE account_id = $1`, [poor.id]);
    expect(
      (await generate({ provider: 'light', country: 'us', sessionType: 'rotating', count: 1 }, poor.apiKey))
        .status,
    ).toBe(403);
  });

  test.each([
    [{ provider: 'premium', country: 'us', sessionType: 'rotating', count: 1 }, 'provider'],
    [{ provider: 'basic', country: 'usa', sessionType: 'rotating', count: 1 }, 'country'],
    [{ provider: 'basic', sessionType: 'rotating', count: 1 }, 'country'],
    [{ provider: 'basic', country: 'us', sessionType: 'sometimes', count: 1 }, 'sessionType'],
    [{ provider: 'basic', country: 'us', sessionType: 'rotating', count: 0 }, 'count'],
    [{ provider: 'basic', country: 'us', sessionType: 'rotating', count: 1001 }, 'count'],
    [{ provider: 'basic', country: 'us', sessionType: 'rotating', count: '5' }, 'count'],
    [{ provider: 'advanced', country: 'us', sessionType: 'rotating', count: 1, state: 'ohio' }, 'state'],
    [
      { provider: 'basic', country: 'us', sessionType: 'sticky', count: 1, lifeTime: 30 },
      'lifeTime: unknown field',
    ],
    [{ provider: 'basic', country: 'zz', sessionType: 'rotating', count: 1 }, 'country'],
    [{ provider: 'basic', country: 'xx', sessionType: 'rotating', count: 1 }, 'country'],
    [{ provider: 'basic', country: 'uk', sessionType: 'rotating', count: 1 }, 'country'],
    [
      { provider: 'basic', country: 'jp', sessionType: 'rotating', count: 1, state: 'tokyo', city: '東京' },
      'city',
    ],
    [
      { provider: 'basic', country: 'us', sessionType: 'rotating', scheme: 'socks4' },
      'scheme: must be http, https or socks5h',
    ],
  ])('400 for %j, naming %s', async (body, field) => {
    const res = await generate(body);
    expect(res.status).toBe(400);
    expect(res.body.success).toBe(false);
    expect(res.body.error).toMatch(new RegExp(`^Invalid request: .*${field}`));
  });

  test('malformed JSON, a non-object body and a wrong content type are refused', async () => {
    expect(
      await call(api.url, '/api/v1/proxies/generate', { key: account.apiKey, body: '{"provider":' }),
    ).toMatchObject({ status: 400, body: { error: 'Request body is not valid JSON' } });
    expect(
      (await call(api.url, '/api/v1/proxies/generate', { key: account.apiKey, body: '[1]' })).status,
    ).toBe(400);
    expect(
      (
        await call(api.url, '/api/v1/proxies/generate', {
          key: account.apiKey,
          body: 'provider=basic',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        })
      ).status,
    ).toBe(415);
  });
});

describe('GET /api/v1/proxies/list', () => {
  test("only the caller's ISP proxies", async () => {
    const other = await accountWithBandwidth(db.pool);
    await db.pool.query(
      `INSERT INTO isp_proxies (account_id, host, port, username, password_enc, country) VALUES ($1, 'h.example', 1, 'x', '\\x00', 'us')`,
      [other.id],
    );
    const res = await call(api.url, '/api/v1/proxies/list', { key: account.apiKey });
    expect(res).toMatchObject({ status: 200, body: { success: true, proxies: [] } });
  });
});
