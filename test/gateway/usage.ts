// What a gateway under test billed and counted: usage batches, flushes, the fold, and its counters.
import type { Registry } from 'prom-client';
import type { Pool } from '#common/db/pool.ts';
import type { RunningGateway } from '../../gateway/src/server.ts';
import { until } from '../process.ts';

/** Billed bytes and requests recorded in usage batches for an account (flushed, unfolded or not). */
export async function recordedUsage(
  pool: Pool,
  accountId: string,
): Promise<{ up: number; down: number; requests: number }> {
  const { rows } = await pool.query<{ up: number; down: number; requests: number }>(
    `SELECT coalesce(sum(bytes_up), 0)::bigint AS up, coalesce(sum(bytes_down), 0)::bigint AS down, coalesce(sum(requests), 0)::bigint AS requests
       FROM usage_batch_lines WHERE account_id = $1`,
    [accountId],
  );
  return rows[0]!;
}

/**
 * A gateway's usage with every byte it settled before this call (ledger.flushSettled: not a timer's
 * flush already in flight, built before the last bytes settled; usage.int.test.ts).
 */
export async function flushedUsage(
  gateway: { ledger: RunningGateway['ledger'] },
  pool: Pool,
  accountId: string,
): Promise<{ up: number; down: number; requests: number }> {
  await gateway.ledger.flushSettled();
  return recordedUsage(pool, accountId);
}

/**
 * A closed connection's usage, once the gateway has billed it: flushes until at least `up` bytes
 * up are recorded (the gateway bills a connection when it sees the close), at most about 1 s.
 */
export async function usageAfterClose(
  gateway: { ledger: RunningGateway['ledger'] },
  pool: Pool,
  accountId: string,
  up: number,
): Promise<{ up: number; down: number; requests: number }> {
  for (let i = 0; i < 50 && Number((await flushedUsage(gateway, pool, accountId)).up) < up; i++)
    await new Promise((r) => setTimeout(r, 20));
  return flushedUsage(gateway, pool, accountId);
}

/**
 * The non-zero series of a gateway counter, keyed by their labels after `plan` joined by spaces
 * (`proxyfleet_gateway_refusals_total`: "wrong_password 4xx").
 */
export async function counterValues(
  gateway: { registry: Registry },
  name: string,
): Promise<Record<string, number>> {
  return Object.fromEntries(
    (await gateway.registry.getSingleMetric(name)!.get()).values
      .filter((v) => v.value > 0)
      .map((v) => [Object.values(v.labels).slice(1).join(' '), v.value]),
  );
}

/** What changed in a set of counter values between two readings. */
export function counterDelta(
  now: Record<string, number>,
  then: Record<string, number>,
): Record<string, number> {
  return Object.fromEntries(
    Object.entries(now)
      .filter(([k, v]) => v !== (then[k] ?? 0))
      .map(([k, v]) => [k, v - (then[k] ?? 0)]),
  );
}

export async function fold(pool: Pool): Promise<void> {
  while (((await pool.query<{ n: number }>('SELECT usage_fold(1000) AS n')).rows[0]?.n ?? 0) > 0);
}

/**
 * What a gateway counted, in the database: once its connections have closed, its usage flushed
 * past any flush already in flight (ledger.flushSettled) and its usage history tally drained (a
 * write in flight waited for, then the rest written).
 */
export async function historyWritten(gateway: Pick<RunningGateway, 'ledger' | 'history'>): Promise<void> {
  await until(() => gateway.ledger.activeConnections === 0, 'connections closed', 10_000);
  await gateway.ledger.flushSettled();
  await gateway.history.drain();
}

/**
 * An account's usage history moved back `days` whole days, hours and days alike, as it stands: a
 * test cannot wait a day to see its traffic as yesterday's.
 */
export async function historyMovedBack(pool: Pool, accountId: string, days = 1): Promise<void> {
  await pool.query(
    `UPDATE usage_history_hourly SET hour = hour - make_interval(days => $2) WHERE account_id = $1`,
    [accountId, days],
  );
  await pool.query(`UPDATE usage_history_daily SET day = day - $2::int WHERE account_id = $1`, [
    accountId,
    days,
  ]);
}
