// A full flow with debug logging on: no API key, admin token or proxy password may appear in any
// log line, whatever happens (success, validation errors, bad keys, server errors).
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Writable } from 'node:stream';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';

let db: TestDatabase;
let api: TestApi;
let logs = '';

beforeAll(async () => {
  db = await createTestDatabase();
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs += chunk.toString();
      done();
    },
  });
  api = await startTestApi(db, { logStream: sink, logLevel: 'trace' });
});
afterAll(async () => {
  await api.close();
  await db.drop();
});

test('keys and proxy passwords never reach the logs', async () => {
  const secrets: string[] = [TEST_ADMIN_TOKEN];
  const admin = (path: string, options: Parameters<typeof call>[2] = {}) =>
    call(api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });

  const account = (await admin('/accounts', { body: { email: exampleEmail() } })).body;
  secrets.push(account.apiKey, account.proxyPassword);
  await admin(`/accounts/${account.id}/purchases`, { body: { product: 'basic', gb: 1 } });
  const named = (await admin(`/accounts/${account.id}/keys`, { body: { name: 'ci' } })).body;
  secrets.push(named.apiKey);
  const isp = (
    await admin(`/accounts/${account.id}/isp-proxies`, {
      body: {
        host: '198.51.100.1',
        port: 3128,
        username: 'ispuser',
        password: 'IspSecret123',
        country: 'us',
      },
    })
  ).body;
  secrets.push(isp.password);

  for (const key of [account.apiKey, named.apiKey]) {
    await call(api.url, '/api/v1/account', { key });
    await call(api.url, '/api/v1/usage', { key, bearer: true });
    await call(api.url, '/api/v1/proxies/list', { key });
    await call(api.url, '/api/v1/proxies/generate', {
      key,
      body: { provider: 'basic', country: 'us', sessionType: 'sticky', count: 2 },
    });
    await call(api.url, '/api/v1/proxies/generate', {
      key,
      body: { provider: 'basic', country: 'usa', sessionType: 'sticky', count: 2 },
    });
    await call(api.url, `/api/v1/proxies/generate?key=${key}`, { key, body: '{"broken":' });
  }
  const rotated = (await admin(`/accounts/${account.id}/keys/primary/regenerate`, { method: 'POST' })).body;
  secrets.push(rotated.apiKey);
  const reset = (await admin(`/accounts/${account.id}/proxy-password/reset`, { method: 'POST' })).body;
  secrets.push(reset.proxyPassword);
  await call(api.url, '/api/v1/usage', { key: account.apiKey }); // the revoked key
  await call(api.url, '/api/v1/usage', { key: rotated.apiKey.replace(/.$/, '0') }); // an unknown one
  await call(api.url, '/api/v1/usage', { key: `${rotated.apiKey} trailing` });
  await admin(`/accounts/${account.id}/keys`, { body: { name: named.apiKey } }); // a key where a name goes
  await call(api.url, '/admin/v1/accounts', { key: rotated.apiKey, bearer: true });
  await call(api.url, `/api/v1/${rotated.apiKey}`, { key: rotated.apiKey });

  expect(logs).toContain('"msg":"request"'); // the access log ran: this test looks at real output
  for (const secret of secrets) {
    expect(secret.length).toBeGreaterThan(8);
    expect(logs).not.toContain(secret);
  }
});
