// GET /api/v1/usage/history: buckets from the rows a gateway's flush writes (written here through
// the same SQL function), filtered by product and sub-user, as JSON and CSV; every bad range is a
// 400 in the spec's error format; another account's sub-user is refused; only an API key reads it.
import { describe, expect, test } from '@jest/globals';
import type { Pool } from '#common/db/pool.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { call, useTestApi } from '#test/api.ts';
import { expectApiKeyOnly } from '#test/route-auth.ts';
import { subUserClient } from '#test/sub-users.ts';

const fx = useTestApi();
const { create } = subUserClient(fx);
const HOUR = 3_600_000;

/** Counts in usage_history_record's order: bytes up, down, requests, then the outcomes. */
function counts(c: Partial<Record<'up' | 'down' | 'ok' | 'badCredentials' | 'timeout' | 's2xx', number>>) {
  const ok = c.ok ?? 0;
  const bad = c.badCredentials ?? 0;
  const timeout = c.timeout ?? 0;
  return [
    c.up ?? 0,
    c.down ?? 0,
    ok + bad + timeout,
    ok,
    0,
    bad,
    0,
    0,
    0,
    0,
    timeout,
    0,
    c.s2xx ?? 0,
    0,
    0,
    0,
  ];
}

async function record(
  pool: Pool,
  rows: { account: string; at: number; product?: string; subUser?: string; counts: number[] }[],
) {
  await pool.query('SELECT usage_history_record($1::jsonb)', [
    JSON.stringify(
      rows.map((r) => ({
        account_id: r.account,
        product: r.product ?? 'basic',
        hour: new Date(r.at).toISOString(),
        sub_user: r.subUser ?? '',
        counts: r.counts,
      })),
    ),
  ]);
}

const hourStart = (t: number) => new Date(Math.floor(t / HOUR) * HOUR).toISOString();

describe('GET /api/v1/usage/history', () => {
  test('hours of the last day by default, every product and sub-user added up, zeros filled; product and subUser filter', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 5e9 });
    const { body: su } = await create(a.apiKey, { name: 'scraper' });
    const now = Date.now();
    await record(fx.db.pool, [
      { account: a.id, at: now - 2 * HOUR, counts: counts({ up: 100, down: 1000, ok: 3, s2xx: 3 }) },
      { account: a.id, at: now, counts: counts({ up: 10, down: 20, badCredentials: 2, timeout: 1 }) },
      { account: a.id, at: now, product: 'mobile', counts: counts({ up: 1, down: 2, ok: 1 }) },
      { account: a.id, at: now, subUser: su.id, counts: counts({ up: 5, down: 5, ok: 1 }) },
      { account: a.id, at: now - 3 * 24 * HOUR, counts: counts({ up: 7, down: 7, ok: 7 }) },
    ]);
    const all = await call(fx.api.url, '/api/v1/usage/history', { key: a.apiKey });
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ success: true, granularity: 'hour', product: null, subUser: null });
    expect(all.body.buckets).toHaveLength(24);
    expect(all.body.to).toBe(new Date(Math.floor(now / HOUR) * HOUR + HOUR).toISOString());
    expect(all.body.totals).toEqual({
      bytesUp: 116,
      bytesDown: 1027,
      requests: 8,
      succeeded: 5,
      refused: { noBandwidth: 0, badCredentials: 2, throttled: 0, targetNotAllowed: 0, noExit: 0 },
      upstreamFailures: { connectError: 0, timeout: 1 },
      other: 0,
      httpStatus: { '2xx': 3, '3xx': 0, '4xx': 0, '5xx': 0 },
    });
    const last = all.body.buckets.at(-1);
    expect(last).toMatchObject({ start: hourStart(now), requests: 5, refused: { badCredentials: 2 } });
    expect(all.body.buckets.at(-2)).toMatchObject({ requests: 0, bytesUp: 0 });

    const mobile = await call(fx.api.url, '/api/v1/usage/history?product=mobile', { key: a.apiKey });
    expect(mobile.body.totals).toMatchObject({ requests: 1, bytesUp: 1, bytesDown: 2 });
    const sub = await call(fx.api.url, `/api/v1/usage/history?subUser=${su.id}`, { key: a.apiKey });
    expect(sub.body).toMatchObject({ subUser: su.id, totals: { requests: 1, bytesUp: 5 } });
  });

  test('days over a range given as dates, to exclusive', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const today = new Date().toISOString().slice(0, 10);
    const day = 24 * HOUR;
    const yesterday = new Date(Date.parse(today) - day).toISOString().slice(0, 10);
    await record(fx.db.pool, [
      { account: a.id, at: Date.parse(yesterday) + 5 * HOUR, counts: counts({ ok: 2, up: 1, down: 1 }) },
      { account: a.id, at: Date.parse(yesterday) + 20 * HOUR, counts: counts({ badCredentials: 2 }) },
      { account: a.id, at: Date.parse(today), counts: counts({ ok: 9 }) },
    ]);
    const res = await call(
      fx.api.url,
      `/api/v1/usage/history?granularity=day&from=${yesterday}&to=${today}`,
      { key: a.apiKey },
    );
    expect(res.status).toBe(200);
    expect(res.body.buckets).toHaveLength(1);
    expect(res.body.buckets[0]).toMatchObject({
      start: `${yesterday}T00:00:00.000Z`,
      requests: 4,
      succeeded: 2,
      refused: { badCredentials: 2 },
    });
  });

  test('CSV with format=csv or Accept: text/csv: the same buckets, a header line, a file name', async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const now = Date.now();
    await record(fx.db.pool, [
      {
        account: a.id,
        at: now,
        counts: counts({ up: 10, down: 20, ok: 1, badCredentials: 2, timeout: 1, s2xx: 1 }),
      },
    ]);
    for (const [path, headers] of [
      ['/api/v1/usage/history?format=csv', {}],
      ['/api/v1/usage/history', { accept: 'text/csv' }],
    ] as const) {
      const res = await call(fx.api.url, path, { key: a.apiKey, headers });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
      expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="usage-hour-.*\.csv"$/);
      const lines = (res.body as string).trimEnd().split('\r\n');
      expect(lines[0]).toBe(
        'start,bytes_up,bytes_down,requests,succeeded,refused_no_bandwidth,refused_bad_credentials,refused_throttled,' +
          'refused_target_not_allowed,refused_no_exit,upstream_connect_error,upstream_timeout,other,status_2xx,status_3xx,status_4xx,status_5xx',
      );
      expect(lines).toHaveLength(25);
      expect(lines[24]).toBe(`${hourStart(now)},10,20,4,1,0,2,0,0,0,0,1,0,1,0,0,0`);
    }
    const json = await call(fx.api.url, '/api/v1/usage/history?format=json', {
      key: a.apiKey,
      headers: { accept: 'text/csv' },
    });
    expect(json.body.success).toBe(true);
  });

  const future = new Date(Date.now() + 3 * 24 * HOUR).toISOString().slice(0, 10);
  test.each([
    ['from=2026-11-28&to=2026-11-27', 'from: must be before to'],
    ['from=2026-01-01&to=2026-03-01', 'to: must be at most 744 hours after from'],
    ['granularity=day&from=2024-01-01&to=2025-06-01', 'to: must be at most 400 days after from'],
    [`from=${future}`, 'from: must not be in the future'],
    [`to=${future}`, 'to: must not be after the current hour'],
    ['from=2026/11/28', 'from: must be a UTC date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM:SSZ)'],
    ['from=28-11-2026', 'from: must be a UTC date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM:SSZ)'],
    ['to=2026-11-28T10:00:00%2B02:00', 'to: must be a UTC date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM:SSZ)'],
    ['from=2026-02-30', 'from: must be a UTC date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM:SSZ)'],
    ['from=yesterday', 'from: must be a UTC date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM:SSZ)'],
    ['granularity=minute', 'granularity: must be one of hour, day'],
    ['product=residential', null],
    ['subUser=not-a-uuid', null],
    ['format=xml', null],
    ['from=2026-11-01&from=2026-11-02', null],
    ['unknown=1', 'unknown: unknown field'],
  ])('?%s is a 400 in the error format', async (qs, error) => {
    const a = await accountWithBandwidth(fx.db.pool);
    const res = await call(fx.api.url, `/api/v1/usage/history?${qs}`, { key: a.apiKey });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: expect.stringMatching(/^Invalid request: /) });
    if (error) expect(res.body.error).toBe(`Invalid request: ${error}`);
  });

  test("another account's sub-user is a 400 that does not say whether it exists", async () => {
    const a = await accountWithBandwidth(fx.db.pool);
    const b = await accountWithBandwidth(fx.db.pool);
    const { body: su } = await create(a.apiKey, { name: 'private' });
    const mine = await call(fx.api.url, `/api/v1/usage/history?subUser=${su.id}`, { key: a.apiKey });
    expect(mine.status).toBe(200);
    for (const id of [su.id, '00000000-0000-4000-8000-000000000000'])
      expect(await call(fx.api.url, `/api/v1/usage/history?subUser=${id}`, { key: b.apiKey })).toEqual(
        expect.objectContaining({
          status: 400,
          body: { success: false, error: 'Invalid request: subUser: must be a sub-user of this account' },
        }),
      );
  });

  test('only an API key reads it', async () => {
    await expectApiKeyOnly(fx, 'GET', '/usage/history');
  });
});
