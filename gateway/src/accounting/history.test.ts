import { describe, expect, it } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { HistoryTally, USAGE_HISTORY_COLUMNS, type UsageHistoryColumn } from './history.ts';

const logger = createLogger('test', 'silent');
const now = Date.UTC(2026, 10, 25, 12, 30);

function capture() {
  const written: { hour: string; sub_user: string; counts: number[] }[][] = [];
  const pool = {
    query: async (_sql: string, params: unknown[]) => {
      written.push(JSON.parse(params[0] as string) as (typeof written)[number]);
      return { rows: [] };
    },
  } as unknown as Pool;
  return { pool, written };
}

/** The counts of a row by column name, zeros left out. */
const named = (counts: number[]) =>
  Object.fromEntries(
    counts.flatMap((n, i) => (n ? [[USAGE_HISTORY_COLUMNS[i] as UsageHistoryColumn, n]] : [])),
  );

describe('HistoryTally', () => {
  it('counts each line once by its outcome, bytes of billed lines only, and status classes of relayed plain HTTP answers', async () => {
    const { pool, written } = capture();
    const tally = new HistoryTally({ pool, plan: 'basic', logger });
    tally.add('acc', '', true, 200, undefined, 100, 1000, true, now);
    tally.add('acc', '', true, 404, undefined, 100, 50, true, now);
    tally.add('acc', '', true, 503, 'cut', 10, 5, true, now);
    tally.add('acc', '', false, 200, undefined, 300, 4000, true, now);
    tally.add('acc', '', true, 407, 'wrong_password', 90, 200, false, now);
    tally.add('acc', '', false, 407, 'wrong_password', 90, 200, false, now);
    tally.add('acc', '', true, 504, 'destination_timeout', 80, 150, false, now);
    tally.add('acc', '', false, 502, 'exit_failed', 80, 150, false, now);
    tally.add('acc', '', true, 402, 'no_bandwidth', 1, 1, false, now);
    tally.add('acc', '', true, 402, 'sub_user_limit', 1, 1, false, now);
    tally.add('acc', '', true, 429, 'connection_limit', 1, 1, false, now);
    tally.add('acc', '', true, 403, 'destination_prohibited', 1, 1, false, now);
    tally.add('acc', '', true, 503, 'no_exit', 1, 1, false, now);
    tally.add('acc', '', true, 503, 'billing_unavailable', 1, 1, false, now);
    tally.add('acc', '', true, 0, 'client_abandoned', 7, 0, true, now);
    await tally.flush();
    expect(written).toHaveLength(1);
    const [row] = written[0]!;
    expect(row!.hour).toBe('2026-11-25T12:00:00.000Z');
    expect(named(row!.counts)).toEqual({
      bytesUp: 517,
      bytesDown: 5055,
      requests: 15,
      succeeded: 3,
      refusedBadCredentials: 2,
      upstreamTimeout: 1,
      upstreamConnectError: 1,
      refusedNoBandwidth: 2,
      refusedThrottled: 1,
      refusedTargetNotAllowed: 1,
      refusedNoExit: 1,
      other: 3,
      status2xx: 1,
      status4xx: 1,
      status5xx: 1,
    });
  });

  it('keeps one entry per account, sub-user and hour, starts afresh after a flush, and holds at most maxEntries', async () => {
    const { pool, written } = capture();
    const tally = new HistoryTally({ pool, plan: 'basic', logger, maxEntries: 3 });
    tally.add('acc', '', false, 200, undefined, 1, 1, true, now);
    tally.add('acc', 'sub1', false, 200, undefined, 1, 1, true, now);
    tally.add('acc', '', false, 200, undefined, 1, 1, true, now + 3_600_000);
    tally.add('acc', '', false, 200, undefined, 1, 1, true, now);
    tally.add('other', '', false, 200, undefined, 1, 1, true, now);
    expect(tally.size).toBe(3);
    expect(tally.dropped).toBe(1);
    await tally.flush();
    expect(written[0]!.map((r) => [r.sub_user, r.hour, r.counts[2]])).toEqual([
      ['', '2026-11-25T12:00:00.000Z', 2],
      ['sub1', '2026-11-25T12:00:00.000Z', 1],
      ['', '2026-11-25T13:00:00.000Z', 1],
    ]);
    expect(tally.size).toBe(0);
  });

  it('a failed write is logged, not thrown', async () => {
    const pool = { query: async () => Promise.reject(new Error('down')) } as unknown as Pool;
    const tally = new HistoryTally({ pool, plan: 'basic', logger });
    tally.add('acc', '', false, 200, undefined, 1, 1, true, now);
    await expect(tally.flush()).resolves.toBeUndefined();
  });
});
