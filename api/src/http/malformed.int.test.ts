// Malformed input gets a 4xx in the documented error format (docs/errors.md), never a 500, and
// nothing is logged at error level (docs/security.md, "Malformed input"). One case per finding
// that answered 500 before: NUL in the sign-in and forgot-password email, more than 50 form
// fields, bad percent-encoding in an API, admin and dashboard path, a corrupt gzip or br body;
// and an unsupported Content-Encoding, which answered 415 with the Content-Type message.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { signedOutForm } from '#test/dashboard.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';

let db: TestDatabase;
let api: TestApi;
let key: string;
const logLines: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db, {
    logLevel: 'info',
    logStream: new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(chunk.toString());
        done();
      },
    }),
  });
  key = (await accountWithBandwidth(db.pool)).apiKey;
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

const errorLines = (from = 0) =>
  logLines
    .slice(from)
    .filter((line) => ['error', 'fatal'].includes((JSON.parse(line) as { level: string }).level))
    .map((l) => l.slice(0, 300));

async function send(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(api.url + path, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    redirect: 'manual',
    headers: init.headers ?? {},
    ...(init.body !== undefined ? { body: init.body } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text.startsWith('{') ? JSON.parse(text) : text };
}

async function dashboardForm(
  path: string,
  fields: [string, string][],
): Promise<{ status: number; body: unknown }> {
  const { cookie, csrf } = await signedOutForm(api.url);
  const body = new URLSearchParams([['_csrf', csrf], ...fields]).toString();
  return send(path, { headers: { 'content-type': 'application/x-www-form-urlencoded', cookie }, body });
}

const json = { 'content-type': 'application/json' };
const withKey = { ...json, 'x-api-key': '' };
const generate = { provider: 'basic', country: 'us', sessionType: 'rotating', count: 1 };

describe('malformed input is a 4xx in the documented format, with nothing logged at error level', () => {
  const cases: [string, () => Promise<{ status: number; body: unknown }>, number, string][] = [
    [
      'NUL in the sign-in email',
      () =>
        dashboardForm('/sign-in', [
          ['email', 'a\u0000@example.test'],
          ['password', 'x'],
        ]),
      400,
      'Request contains a NUL character',
    ],
    [
      'NUL in the forgot-password email',
      () => dashboardForm('/forgot-password', [['email', 'a\u0000@example.test']]),
      400,
      'Request contains a NUL character',
    ],
    [
      'more than 50 form fields',
      () =>
        dashboardForm(
          '/sign-in',
          Array.from({ length: 60 }, (_, i): [string, string] => [`f${i}`, 'x']),
        ),
      413,
      'Request has too many form fields',
    ],
    [
      'bad percent-encoding in an API path',
      () => send('/api/v1/ip-allowlist/%zz', { method: 'DELETE', headers: { 'x-api-key': key } }),
      400,
      'Request path is not valid percent-encoding',
    ],
    [
      'bad percent-encoding in an admin path',
      () => send('/admin/v1/accounts/%E0%A4%A', { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } }),
      400,
      'Request path is not valid percent-encoding',
    ],
    [
      'bad percent-encoding in a dashboard path',
      () => send('/settings/keys/%zz/revoke'),
      400,
      'Request path is not valid percent-encoding',
    ],
    [
      'Content-Encoding: gzip with a body that is not',
      () =>
        send('/api/v1/proxies/generate', {
          headers: { ...withKey, 'x-api-key': key, 'content-encoding': 'gzip' },
          body: JSON.stringify(generate),
        }),
      400,
      'Request body cannot be decoded',
    ],
    [
      'Content-Encoding: br with a body that is not',
      () =>
        send('/api/v1/proxies/generate', {
          headers: { ...withKey, 'x-api-key': key, 'content-encoding': 'br' },
          body: Buffer.from('not brotli at all, not at all'),
        }),
      400,
      'Request body cannot be decoded',
    ],
    [
      'an unsupported Content-Encoding',
      () =>
        send('/api/v1/proxies/generate', {
          headers: { ...withKey, 'x-api-key': key, 'content-encoding': 'compress' },
          body: JSON.stringify(generate),
        }),
      415,
      'Content-Encoding must be gzip, deflate, br or identity',
    ],
    [
      'NUL in a JSON string field',
      () =>
        send('/api/v1/sub-users', {
          headers: { ...withKey, 'x-api-key': key },
          body: JSON.stringify({ name: 'a\u0000b' }),
        }),
      400,
      'Request contains a NUL character',
    ],
  ];

  it.each(cases)('%s', async (_name, request, status, error) => {
    const before = logLines.length;
    const res = await request();
    expect(res).toEqual({ status, body: { success: false, error } });
    expect(errorLines(before)).toEqual([]);
  });

  it('logged nothing at error level in all', () => {
    expect(errorLines()).toEqual([]);
  });
});
