// Target statistics over the API (docs/adr/0026): the day's domains most bytes first, date and
// product validation, the opt-out (customer and operator) deleting what was stored, and the
// worker's 30-day retention.
import { describe, expect, test } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import { accountWithBandwidth, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { targetRetentionJob } from '../../../../worker/src/jobs/target-retention.ts';
import { call, useTestApi } from '#test/api.ts';

const fx = useTestApi();
const DAY_MS = 86_400_000;
const day = (daysAgo: number) => new Date(Date.now() - daysAgo * DAY_MS).toISOString().slice(0, 10);

/** What a gateway's flush writes (target_usage_record, the cap as the gateways pass it). */
const record = (accountId: string, rows: [string, string, string, number, number][], cap = 200) =>
  fx.db.pool.query('SELECT target_usage_record($1::jsonb, $2)', [
    JSON.stringify(
      rows.map(([product, d, domain, bytes, requests]) => ({
        account_id: accountId,
        product,
        day: d,
        domain,
        bytes,
        requests,
      })),
    ),
    cap,
  ]);

const stored = async (accountId: string) =>
  (await fx.db.pool.query('SELECT count(*)::int AS n FROM target_usage WHERE account_id = $1', [accountId]))
    .rows[0].n as number;

describe('GET /api/v1/usage/targets', () => {
  test('the day asked for, most bytes first, one product on request; today by default', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    await record(a.id, [
      ['basic', day(0), 'example.com', 500, 5],
      ['basic', day(0), 'example.org', 900, 1],
      ['mobile', day(0), 'example.com', 100, 2],
      ['basic', day(1), 'yesterday.net', 7, 1],
      ['basic', day(0), 'example.com', 250, 1],
    ]);
    const res = await call(fx.api.url, '/api/v1/usage/targets', { key: a.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      date: day(0),
      enabled: true,
      targets: [
        { domain: 'example.org', product: 'basic', bytes: 900, requests: 1 },
        { domain: 'example.com', product: 'basic', bytes: 750, requests: 6 },
        { domain: 'example.com', product: 'mobile', bytes: 100, requests: 2 },
      ],
    });
    const basic = await call(fx.api.url, `/api/v1/usage/targets?date=${day(1)}&product=basic`, {
      key: a.apiKey,
    });
    expect(basic.body.targets).toEqual([
      { domain: 'yesterday.net', product: 'basic', bytes: 7, requests: 1 },
    ]);
  });

  test.each([
    ['date=2026-13-01', 'Invalid request: date: must be a date that exists'],
    ['date=yesterday', 'Invalid request: date: must be a date in the form YYYY-MM-DD'],
    [`date=${day(-1)}`, 'Invalid request: date: must not be in the future'],
    [`date=${day(30)}`, 'Invalid request: date: must be within the last 30 days'],
    ['product=gold', 'Invalid request: product: must be one of light, basic, advanced, mobile, datacenter'],
    ['path=/x', 'Invalid request: path: unknown field'],
    ['date=2026-01-01&date=2026-01-02', 'Invalid request: date: must be a string'],
  ])('?%s is refused: %s', async (query, error) => {
    const a = await accountWithBandwidth(fx.db.pool);
    const res = await call(fx.api.url, `/api/v1/usage/targets?${query}`, { key: a.apiKey });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error });
  });

  test('the OpenAPI document lists date, product and subUser as query parameters', async () => {
    const doc = await call(fx.api.url, '/api/v1/openapi.json');
    const params = doc.body.paths['/api/v1/usage/targets'].get.parameters;
    expect(params.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual([
      'query:date',
      'query:product',
      'query:subUser',
    ]);
  });

  test('the per-day cap folds further domains into (other), per product', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    await record(a.id, [['basic', day(0), 'one.com', 10, 1]], 2);
    await record(
      a.id,
      [
        ['basic', day(0), 'two.com', 30, 1],
        ['basic', day(0), 'three.com', 20, 1],
        ['basic', day(0), 'four.com', 5, 1],
        ['light', day(0), 'three.com', 1, 1],
      ],
      2,
    );
    const res = await call(fx.api.url, '/api/v1/usage/targets', { key: a.apiKey });
    expect(res.body.targets).toEqual([
      { domain: 'two.com', product: 'basic', bytes: 30, requests: 1 },
      { domain: '(other)', product: 'basic', bytes: 25, requests: 2 },
      { domain: 'one.com', product: 'basic', bytes: 10, requests: 1 },
      { domain: 'three.com', product: 'light', bytes: 1, requests: 1 },
    ]);
  });
});

describe('opting out', () => {
  test('the customer opts out: what was stored is deleted and nothing more is recorded; opting in again records', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    await record(a.id, [['basic', day(0), 'example.com', 10, 1]]);
    const off = await call(fx.api.url, '/api/v1/account/target-stats', {
      method: 'PUT',
      key: a.apiKey,
      body: { enabled: false },
    });
    expect(off.status).toBe(200);
    expect(off.body).toEqual({ success: true, enabled: false });
    expect(await stored(a.id)).toBe(0);
    await record(a.id, [['basic', day(0), 'example.com', 10, 1]]);
    expect(await stored(a.id)).toBe(0);
    const res = await call(fx.api.url, '/api/v1/usage/targets', { key: a.apiKey });
    expect(res.body).toMatchObject({ enabled: false, targets: [] });

    await call(fx.api.url, '/api/v1/account/target-stats', {
      method: 'PUT',
      key: a.apiKey,
      body: { enabled: true },
    });
    await record(a.id, [['basic', day(0), 'example.com', 10, 1]]);
    expect(await stored(a.id)).toBe(1);
  });

  test('the operator opts an account out and reads its statistics', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    await record(a.id, [['datacenter', day(2), 'example.com', 10, 1]]);
    const admin = { admin: TEST_ADMIN_TOKEN };
    const read = await call(fx.api.url, `/admin/v1/accounts/${a.id}/usage/targets?date=${day(2)}`, admin);
    expect(read.body.targets).toEqual([
      { domain: 'example.com', product: 'datacenter', bytes: 10, requests: 1 },
    ]);
    const off = await call(fx.api.url, `/admin/v1/accounts/${a.id}/target-stats`, {
      ...admin,
      method: 'PUT',
      body: { enabled: false },
    });
    expect(off.status).toBe(200);
    expect(await stored(a.id)).toBe(0);
    const missing = '00000000-0000-4000-8000-000000000000';
    expect((await call(fx.api.url, `/admin/v1/accounts/${missing}/usage/targets`, admin)).status).toBe(404);
    const bad = await call(fx.api.url, `/admin/v1/accounts/${a.id}/target-stats`, {
      ...admin,
      method: 'PUT',
      body: { enabled: 'no' },
    });
    expect(bad.body).toEqual({ success: false, error: 'Invalid request: enabled: must be a boolean' });
  });
});

describe('retention', () => {
  test('the worker job deletes days older than 30 (today included) and keeps the rest', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    await record(a.id, [
      ['basic', day(0), 'today.com', 1, 1],
      ['basic', day(29), 'kept.com', 1, 1],
      ['basic', day(30), 'gone.com', 1, 1],
      ['basic', day(45), 'long-gone.com', 1, 1],
    ]);
    await targetRetentionJob.run({ pool: fx.db.pool, logger: createLogger('test', 'silent') });
    const { rows } = await fx.db.pool.query<{ domain: string }>(
      'SELECT domain FROM target_usage WHERE account_id = $1 ORDER BY domain',
      [a.id],
    );
    expect(rows.map((r) => r.domain)).toEqual(['kept.com', 'today.com']);
  });
});
