// docs/errors.md and common/src/errors.ts must list the same codes with the same status and
// message (fastify's error catalogue test), and docs/api.md must show every route.
import { describe, expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { ERRORS } from '#common/errors.ts';
import { adminRoutes } from './modules/admin/routes.ts';
import { adminAllowlistRoutes, allowlistRoutes } from './modules/ip-allowlist/routes.ts';
import { adminSubUserRoutes, subUserRoutes } from './modules/sub-users/routes.ts';
import { adminTwoFactorRoutes } from './modules/two-factor/routes.ts';

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

describe('docs/errors.md', () => {
  const rows = read('docs/errors.md')
    .split('\n')
    // Cells may be padded (prettier aligns table columns).
    .map((line) => /^\|\s*([A-Z_]+)\s*\|\s*(\d{3})\s*\|\s*((?:\\\||[^|])+?)\s*\|.*\|$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [m[1]!, { status: Number(m[2]), message: m[3]!.replace(/\\\|/g, '|') }] as const);

  test('lists every code of the table, once, with its status and message', () => {
    expect(rows.map(([code]) => code).sort()).toEqual(Object.keys(ERRORS).sort());
    expect(Object.fromEntries(rows)).toEqual(ERRORS);
  });
});

describe('docs/api.md', () => {
  const doc = read('docs/api.md');
  const stub = {} as never;
  const admin = adminRoutes({
    pool: stub,
    credentialsKey: Buffer.alloc(32),
    accounts: stub,
    waitForApiCaches: stub,
    linkBase: stub,
  });
  const allowlist = { pool: stub, limit: 20, allowPrivate: false };
  const subUsers = { pool: stub, credentialsKey: Buffer.alloc(32), limit: 50 };
  const routes = [
    'GET /api/v1/account',
    'GET /api/v1/usage',
    'GET /api/v1/proxies/list',
    'POST /api/v1/proxies/generate',
    'GET /api/v1/audit-log',
    'GET /admin/v1/accounts/:id/audit-log',
    'GET /api/v1/card',
    'POST /api/v1/card/setup',
    'POST /api/v1/card-purchases',
    'GET /api/v1/card-payments/:id',
    'GET /api/v1/subscriptions',
    'POST /api/v1/subscriptions',
    'POST /webhooks/stripe',
    ...admin.map((r) => `${r.method.toUpperCase()} /admin/v1${r.path}`),
    ...allowlistRoutes(allowlist).map((r) => `${r.method.toUpperCase()} /api/v1${r.path}`),
    ...adminAllowlistRoutes(allowlist).map((r) => `${r.method.toUpperCase()} /admin/v1${r.path}`),
    ...subUserRoutes(subUsers).map((r) => `${r.method.toUpperCase()} /api/v1${r.path}`),
    ...adminSubUserRoutes(subUsers).map((r) => `${r.method.toUpperCase()} /admin/v1${r.path}`),
    ...adminTwoFactorRoutes(stub).map((r) => `${r.method.toUpperCase()} /admin/v1${r.path}`),
  ];
  test.each(routes)('documents %s with a curl example', (route) => {
    const [method, path] = route.split(' ') as [string, string];
    expect(doc).toContain(`### ${method} ${path}`);
    const section = doc.slice(doc.indexOf(`### ${method} ${path}`)).split('\n### ')[0]!;
    expect(section).toContain('curl ');
  });
});
