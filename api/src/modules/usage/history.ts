// Usage history (docs/api.md "Usage history", docs/adr/0103): the range checked against the caps,
// the buckets read and filled with zeros, and the same buckets as CSV.
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import { HISTORY_COLUMNS, ownsSubUser, readHistory } from './history-repo.ts';
import {
  BUCKET_MS,
  MAX_BUCKETS,
  type HistoryCounts,
  type UsageHistory,
  type UsageHistoryQuery,
} from './history-schemas.ts';

/** The range's default length, in buckets: a day of hours, 30 days. */
const DEFAULT_BUCKETS = { hour: 24, day: 30 } as const;

const refuse = (detail: string) => new AppError('VALIDATION_FAILED', { detail });

/** The range a query names, rounded out to whole buckets, or a 400 that says what is wrong. */
export function historyRange(q: UsageHistoryQuery, now = Date.now()): { from: Date; to: Date } {
  const size = BUCKET_MS[q.granularity];
  const down = (t: number) => Math.floor(t / size) * size;
  const up = (t: number) => Math.ceil(t / size) * size;
  const current = down(now) + size;
  const to = q.to ? up(q.to.getTime()) : current;
  const from = q.from ? down(q.from.getTime()) : to - DEFAULT_BUCKETS[q.granularity] * size;
  if (q.from && q.from.getTime() > now) throw refuse('from: must not be in the future');
  if (to > current) throw refuse(`to: must not be after the current ${q.granularity}`);
  if (q.from && q.to && q.from.getTime() >= q.to.getTime()) throw refuse('from: must be before to');
  const max = MAX_BUCKETS[q.granularity];
  if ((to - from) / size > max)
    throw refuse(`to: must be at most ${max} ${q.granularity === 'hour' ? 'hours' : 'days'} after from`);
  return { from: new Date(from), to: new Date(to) };
}

const zero = (): number[] => HISTORY_COLUMNS.map(() => 0);

function counts(c: number[]): HistoryCounts {
  const n = (i: number) => c[i] ?? 0;
  return {
    bytesUp: n(0),
    bytesDown: n(1),
    requests: n(2),
    succeeded: n(3),
    refused: {
      noBandwidth: n(4),
      badCredentials: n(5),
      throttled: n(6),
      targetNotAllowed: n(7),
      noExit: n(8),
    },
    upstreamFailures: { connectError: n(9), timeout: n(10) },
    other: n(11),
    httpStatus: { '2xx': n(12), '3xx': n(13), '4xx': n(14), '5xx': n(15) },
  };
}

export async function usageHistory(
  pool: Pool,
  accountId: string,
  q: UsageHistoryQuery,
  now = Date.now(),
): Promise<UsageHistory> {
  const { from, to } = historyRange(q, now);
  // Another account's sub-user is refused as an unknown one: nothing says it exists.
  if (q.subUser && !(await ownsSubUser(pool, accountId, q.subUser)))
    throw refuse('subUser: must be a sub-user of this account');
  const rows = await readHistory(pool, {
    accountId,
    granularity: q.granularity,
    from,
    to,
    product: q.product,
    subUser: q.subUser,
  });
  const byStart = new Map(rows.map((r) => [r.start, r.counts]));
  const total = zero();
  const buckets: UsageHistory['buckets'] = [];
  for (let t = from.getTime(); t < to.getTime(); t += BUCKET_MS[q.granularity]) {
    const c = byStart.get(t) ?? zero();
    c.forEach((v, i) => (total[i]! += v));
    buckets.push({ start: new Date(t).toISOString(), ...counts(c) });
  }
  return {
    success: true,
    granularity: q.granularity,
    from: from.toISOString(),
    to: to.toISOString(),
    product: q.product ?? null,
    subUser: q.subUser ?? null,
    totals: counts(total),
    buckets,
  };
}

/** The CSV's header: the bucket's start, then the counters under the tables' names. */
export const CSV_HEADER = ['start', ...HISTORY_COLUMNS];

/** The buckets as CSV (RFC 4180: CRLF line ends, a header line); numbers only, nothing to quote. */
export function historyCsv(history: UsageHistory): string {
  const lines = [CSV_HEADER.join(',')];
  for (const b of history.buckets)
    lines.push(
      [
        b.start,
        b.bytesUp,
        b.bytesDown,
        b.requests,
        b.succeeded,
        b.refused.noBandwidth,
        b.refused.badCredentials,
        b.refused.throttled,
        b.refused.targetNotAllowed,
        b.refused.noExit,
        b.upstreamFailures.connectError,
        b.upstreamFailures.timeout,
        b.other,
        b.httpStatus['2xx'],
        b.httpStatus['3xx'],
        b.httpStatus['4xx'],
        b.httpStatus['5xx'],
      ].join(','),
    );
  return lines.join('\r\n') + '\r\n';
}
