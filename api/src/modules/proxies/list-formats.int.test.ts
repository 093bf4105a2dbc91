// Proxy lists in every format (docs/api.md "Proxy list formats", docs/adr/0087) through the API:
// generate and list with format and template, the refusals in the spec's error format, and a
// generated socks5h:// URL used by curl through a real gateway (SOCKS5 on the plan's port).
import { beforeAll, describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { upsertGatewayEndpoint } from '#common/gateway-endpoints.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import { knownCustomer } from '#test/customers.ts';
import { useTestGateway } from '#test/gateway/fixture.ts';
import { TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { seal } from '#common/secrets.ts';
import { MAX_TEMPLATE_LENGTH } from './list-format.ts';

const fx = useTestGateway();
let api: TestApi;
let account: Awaited<ReturnType<typeof knownCustomer>>;

const generate = (body: Record<string, unknown>) =>
  call(api.url, '/api/v1/proxies/generate', {
    key: account.apiKey,
    body: { provider: 'basic', country: 'us', sessionType: 'rotating', count: 2, ...body },
  });
const list = (query: string) => call(api.url, `/api/v1/proxies/list?${query}`, { key: account.apiKey });

function curl(args: string[]): Promise<string> {
  return new Promise((resolve) =>
    execFile('curl', ['--silent', '--max-time', '20', ...args], (_err, stdout) => resolve(stdout)),
  );
}

const basic = () => ({ plan: 'basic', host: '127.0.0.1', port: fx.gateway.port }) as const;

// After the fixture's own beforeAll: an API on its database, the basic plan advertised on its port.
beforeAll(async () => {
  api = await startTestApi(fx.db);
  fx.onClose(() => api.close());
  await upsertGatewayEndpoint(fx.db.pool, basic(), 'test');
  account = await knownCustomer(fx);
});

describe('proxy list formats', () => {
  test('generate: every format carries the same proxies as the colon form', async () => {
    const colon = (await generate({ format: 'colon' })).body as { proxies: string[]; lines: string[] };
    expect(colon.lines).toEqual(colon.proxies);
    const parts = colon.proxies.map((p) => {
      const [host, port, username, ...password] = p.split(':');
      return { host: host!, port: Number(port), username: username!, password: password.join(':') };
    });
    const url = await generate({ format: 'url', scheme: 'socks5h' });
    expect(url).toMatchObject({ status: 200, body: { success: true, format: 'url' } });
    expect(url.body.lines).toEqual(
      parts.map((p) => `socks5h://${p.username}:${p.password}@${p.host}:${p.port}`),
    );
    expect(url.body.urls).toEqual(url.body.lines);
    expect((await generate({ format: 'url' })).body.lines[0]).toMatch(/^http:\/\//);
    const csv = await generate({ format: 'csv' });
    expect(csv.body.lines).toEqual([
      'host,port,username,password',
      ...parts.map((p) => `${p.host},${p.port},${p.username},${p.password}`),
    ]);
    expect((await generate({ format: 'json' })).body.entries).toEqual(parts);
    const template = await generate({
      format: 'template',
      template: 'curl -x http://{user}:{pass}@{host}:{port}',
    });
    expect(template.body.lines).toEqual(
      parts.map((p) => `curl -x http://${p.username}:${p.password}@${p.host}:${p.port}`),
    );
    // Without format the answer is as before: proxies (and urls with a scheme), nothing more.
    expect(Object.keys((await generate({})).body).sort()).toEqual(['proxies', 'success']);
  });

  test('a generated socks5h:// URL works with curl through the gateway', async () => {
    const url = ((await generate({ format: 'url', scheme: 'socks5h', count: 1 })).body.lines as string[])[0]!;
    const answer = await curl([
      '--proxy',
      url,
      '-o',
      '/dev/null',
      '-w',
      '%{http_code} %{size_download}',
      `http://localhost:${fx.origin.port}/bytes/1000`,
    ]);
    expect(answer).toBe('200 1000');
  });

  test('list: the ISP proxies in the same formats; URLs are http://', async () => {
    await fx.db.pool.query(
      `INSERT INTO isp_proxies (account_id, host, port, username, password_enc, country)
       VALUES ($1, '198.51.100.7', 3128, 'isp1', $2, 'us')`,
      [account.id, seal(TEST_CREDENTIALS_KEY, 'secret1')],
    );
    expect((await list('format=colon')).body.lines).toEqual(['198.51.100.7:3128:isp1:secret1']);
    expect((await list('format=url')).body.lines).toEqual(['http://isp1:secret1@198.51.100.7:3128']);
    expect((await list('format=csv')).body.lines).toEqual([
      'host,port,username,password',
      '198.51.100.7,3128,isp1,secret1',
    ]);
    expect((await list('format=json')).body.entries).toEqual([
      { host: '198.51.100.7', port: 3128, username: 'isp1', password: 'secret1' },
    ]);
    expect(
      (await list(`format=template&template=${encodeURIComponent('{host} {port} {user} {pass}')}`)).body,
    ).toMatchObject({
      success: true,
      format: 'template',
      lines: ['198.51.100.7 3128 isp1 secret1'],
    });
    expect(Object.keys((await list('')).body).sort()).toEqual(['proxies', 'success']);
  });

  const long = 'x'.repeat(5000);
  test.each([
    ['an unknown format', { format: 'yaml' }, 'format: must be one of colon, url, csv, json, template'],
    [
      'format template without a template',
      { format: 'template' },
      'template: is required with format template',
    ],
    [
      'a template without format template',
      { template: '{host}' },
      'template: applies to format template only',
    ],
    [
      'an unknown placeholder',
      { format: 'template', template: '{host}:{password}' },
      'template: has unknown placeholder {password}; use {host}, {port}, {user}, {pass}',
    ],
    [
      'a template of 5,000 characters',
      { format: 'template', template: long },
      `template: must be at most ${MAX_TEMPLATE_LENGTH} characters`,
    ],
    ['an unknown scheme', { format: 'url', scheme: 'socks4' }, 'scheme: must be http, https or socks5h'],
  ])('400 in the spec format for %s, on generate and on list', async (_label, fields, message) => {
    const generated = await generate(fields);
    expect(generated).toMatchObject({ status: 400, body: { success: false } });
    expect(generated.body.error).toContain(message);
    if ('scheme' in fields) return;
    const listed = await list(new URLSearchParams(fields as Record<string, string>).toString());
    expect(listed).toMatchObject({ status: 400, body: { success: false } });
    expect(listed.body.error).toContain(message);
  });

  test('socks5h is refused like http where the plan refuses credentials in clear', async () => {
    await upsertGatewayEndpoint(
      fx.db.pool,
      { ...basic(), tls: true, refuseCredentialsInClear: true },
      'test',
    );
    try {
      expect(await generate({ format: 'url', scheme: 'socks5h' })).toMatchObject({
        status: 409,
        body: { success: false, error: 'The basic plan refuses credentials sent in clear; use scheme https' },
      });
    } finally {
      await upsertGatewayEndpoint(fx.db.pool, basic(), 'test');
    }
  });
});
