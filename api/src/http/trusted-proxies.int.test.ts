// PROXYFLEET_API_TRUSTED_PROXIES (docs/adr/0123, docs/security.md "Headers"): behind an Ingress
// the API sees plain HTTP with X-Forwarded-Proto: https. Only from a peer inside the trusted ranges
// does that header make the request HTTPS (HSTS, Secure __Host- cookies) and X-Forwarded-For name
// the client; the same headers from any other peer change nothing. Real HTTP requests from two
// loopback addresses: 127.0.0.2 is the trusted proxy, 127.0.0.1 a client that forges them.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { STRONG } from '#test/dashboard.ts';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { loadApiConfig } from '#api/config.ts';
import { hashPassword } from '#api/modules/dashboard/passwords.ts';
import { testEnv } from '#test/api.ts';

const PROXY = '127.0.0.2';
const STRANGER = '127.0.0.1';
const HTTPS = { 'x-forwarded-proto': 'https' };
const HSTS = 'max-age=31536000; includeSubDomains';

let db: TestDatabase;
let api: TestApi;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db, { env: { PROXYFLEET_API_TRUSTED_PROXIES: `${PROXY}/32,fd00::/8` } });
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One request to the API from the local address `from`. */
function send(
  from: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const url = new URL(path, api.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: options.method ?? 'GET', localAddress: from, headers: options.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const setCookies = (a: Answer) => a.headers['set-cookie'] ?? [];
const cookieNamed = (a: Answer, name: string) => setCookies(a).find((c) => c.startsWith(`${name}=`));

describe('HTTPS as a trusted proxy says it', () => {
  it('a trusted proxy saying https: HSTS and a Secure __Host- pre-session cookie', async () => {
    const res = await send(PROXY, '/sign-in', { headers: HTTPS });
    expect(res.status).toBe(200);
    expect(res.headers['strict-transport-security']).toBe(HSTS);
    const cookie = cookieNamed(res, '__Host-pf_pre');
    expect(cookie).toMatch(/; Secure/);
    expect(cookie).toMatch(/; Path=\//);
    expect(cookie).not.toMatch(/Domain=/);
    expect(cookieNamed(res, 'pf_pre')).toBeUndefined();
  });

  it('the trusted proxy over plain HTTP (no header, or http): neither', async () => {
    for (const headers of [{}, { 'x-forwarded-proto': 'http' }] as Record<string, string>[]) {
      const res = await send(PROXY, '/sign-in', { headers });
      expect(res.headers['strict-transport-security']).toBeUndefined();
      expect(cookieNamed(res, 'pf_pre')).not.toMatch(/Secure/);
      expect(cookieNamed(res, '__Host-pf_pre')).toBeUndefined();
    }
  });

  it.each([
    ['on the dashboard', '/sign-in', {}],
    ['on the API', '/api/v1/usage', {}],
    ['on the admin API', '/admin/v1/accounts', { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }],
  ])('X-Forwarded-Proto forged by an untrusted peer switches nothing on, %s', async (_what, path, auth) => {
    const forged = { ...auth, ...HTTPS, forwarded: 'proto=https', 'x-forwarded-for': PROXY };
    const res = await send(STRANGER, path, { headers: forged });
    expect(res.status).toBeLessThan(500);
    expect(res.headers['strict-transport-security']).toBeUndefined();
    for (const cookie of setCookies(res)) {
      expect(cookie).not.toMatch(/Secure/);
      expect(cookie).not.toMatch(/^__Host-/);
    }
  });

  it('X-Forwarded-For names the client only through a trusted proxy (the audit log says who)', async () => {
    const created = await send(PROXY, '/admin/v1/accounts', {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
        'content-type': 'application/json',
        'x-forwarded-for': '203.0.113.7',
      },
      body: JSON.stringify({ email: exampleEmail('proxied') }),
    });
    expect(created.status).toBe(201);
    const id = (JSON.parse(created.body) as { id: string }).id;
    const alerts = (from: string, forwardedFor: string, newInvoice: boolean) =>
      send(from, `/admin/v1/accounts/${id}/alerts`, {
        method: 'PUT',
        headers: {
          authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
          'content-type': 'application/json',
          'x-forwarded-for': forwardedFor,
        },
        body: JSON.stringify({ newInvoice }),
      });
    expect((await alerts(PROXY, '203.0.113.7', false)).status).toBe(200);
    expect((await alerts(STRANGER, '198.51.100.9', true)).status).toBe(200);
    const log = await send(PROXY, `/admin/v1/accounts/${id}/audit-log?limit=50`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    const ips = (JSON.parse(log.body) as { entries: { action: string; actor: { ip: string } }[] }).entries
      .filter((e) => e.action === 'alerts.updated')
      .map((e) => e.actor.ip);
    expect(ips.sort()).toEqual([STRANGER, '203.0.113.7']);
  });

  it('signs in over HTTPS through the proxy; that session is not read over plain HTTP', async () => {
    const email = exampleEmail('https-sign-in');
    const created = await send(PROXY, '/admin/v1/accounts', {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email }),
    });
    const id = (JSON.parse(created.body) as { id: string }).id;
    await db.pool.query('INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, $2)', [
      id,
      await hashPassword(STRONG),
    ]);
    const form = await send(PROXY, '/sign-in', { headers: HTTPS });
    const pre = cookieNamed(form, '__Host-pf_pre')!.split(';')[0]!;
    const csrf = /name="_csrf" value="([^"]+)"/.exec(form.body)![1]!;
    const signedIn = await send(PROXY, '/sign-in', {
      method: 'POST',
      headers: { ...HTTPS, 'content-type': 'application/x-www-form-urlencoded', cookie: pre },
      body: new URLSearchParams({ _csrf: csrf, email, password: STRONG }).toString(),
    });
    expect(signedIn.status).toBe(303);
    const session = cookieNamed(signedIn, '__Host-pf_session')!;
    expect(session).toMatch(/; Secure/);
    expect(session).toMatch(/; HttpOnly/);
    const cookie = session.split(';')[0]!;
    expect((await send(PROXY, '/settings', { headers: { ...HTTPS, cookie } })).status).toBe(200);
    // A browser never sends a Secure cookie over HTTP; a client that does is not signed in by it.
    for (const [from, headers] of [
      [PROXY, { cookie }],
      [STRANGER, { ...HTTPS, cookie }],
    ] as const) {
      const res = await send(from, '/settings', { headers });
      expect([res.status, res.headers.location]).toEqual([303, '/sign-in']);
    }
  });
});

describe('PROXYFLEET_API_TRUSTED_PROXIES', () => {
  const config = (env: Record<string, string>) => () => loadApiConfig(testEnv('postgresql://x/y', env));

  it('takes ranges and bare addresses; refuses anything else, and hops beside it', () => {
    expect(config({ PROXYFLEET_API_TRUSTED_PROXIES: '10.42.0.0/16, fd00::/8,192.0.2.1' })()).toMatchObject({
      PROXYFLEET_API_TRUSTED_PROXIES: ['10.42.0.0/16', 'fd00::/8', '192.0.2.1'],
    });
    expect(config({ PROXYFLEET_API_TRUSTED_PROXIES: '10.42.0.0/33' })).toThrow(/address ranges/);
    expect(config({ PROXYFLEET_API_TRUSTED_PROXIES: 'ingress-nginx' })).toThrow(/address ranges/);
    expect(
      config({ PROXYFLEET_API_TRUSTED_PROXIES: '10.42.0.0/16', PROXYFLEET_API_TRUST_PROXY_HOPS: '1' }),
    ).toThrow(/not both/);
  });
});
