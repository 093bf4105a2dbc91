// Subscription periods (docs/billing.md "Periods"): monthly, on the start day's anniversary in
// UTC. Period n starts at started + n months, the day clamped to the month's last day and always
// computed from the start (31 Jan -> 28/29 Feb -> 31 Mar), the time of day kept. The SQL twin is
// migrations/functions/subscriptions/subscription_period_start.sql; test/periods keep both equal.

/** The start of period n (0 = the subscription's start). */
export function periodStart(started: Date, n: number): Date {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`period must be a whole number >= 0, got ${n}`);
  const year = started.getUTCFullYear();
  const month = started.getUTCMonth() + n;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return new Date(
    Date.UTC(
      year,
      month,
      Math.min(started.getUTCDate(), lastDay),
      started.getUTCHours(),
      started.getUTCMinutes(),
      started.getUTCSeconds(),
      started.getUTCMilliseconds(),
    ),
  );
}

/** The period that contains `at` (-1 before the start). */
export function periodAt(started: Date, at: Date): number {
  if (at < started) return -1;
  let n = (at.getUTCFullYear() - started.getUTCFullYear()) * 12 + at.getUTCMonth() - started.getUTCMonth();
  while (n > 0 && periodStart(started, n) > at) n--;
  while (periodStart(started, n + 1) <= at) n++;
  return n;
}
