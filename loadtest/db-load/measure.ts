// What the database load generator measures: call latencies per kind, CPU of a process tree from
// /proc (PostgreSQL: the postmaster, its children, and what its exited children used), and
// PostgreSQL's and PgBouncer's own counters.
import { readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import type pg from 'pg';
import type { PgBouncer } from '#test/pgbouncer.ts';

/** Latency samples (ms) and failures of one kind of call, since the last reset. */
export class Calls {
  private samples: number[] = [];
  failures = 0;

  /** Times `fn`; a rejection or a result `failed(result)` counts as a failure (its time is kept). */
  async time<T>(fn: () => Promise<T>, failed: (result: T) => boolean = () => false): Promise<T> {
    const started = performance.now();
    try {
      const result = await fn();
      if (failed(result)) this.failures++;
      return result;
    } catch (err) {
      this.failures++;
      throw err;
    } finally {
      this.samples.push(performance.now() - started);
    }
  }

  add(ms: number): void {
    this.samples.push(ms);
  }

  /** The samples so far (a copy). */
  all(): number[] {
    return [...this.samples];
  }

  reset(): void {
    this.samples = [];
    this.failures = 0;
  }

  summary(seconds: number): {
    count: number;
    perSecond: number;
    p50: number;
    p99: number;
    max: number;
    failures: number;
  } {
    const sorted = [...this.samples].sort((a, b) => a - b);
    const q = (p: number) =>
      sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? 0;
    const round = (x: number) => Math.round(x * 10) / 10;
    return {
      count: sorted.length,
      perSecond: round(sorted.length / seconds),
      p50: round(q(0.5)),
      p99: round(q(0.99)),
      max: round(sorted.at(-1) ?? 0),
      failures: this.failures,
    };
  }
}

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

interface ProcStat {
  ppid: number;
  /** utime + stime, in clock ticks. */
  own: number;
  /** cutime + cstime: what its exited, waited-for children used. */
  children: number;
}

function procStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return {
      ppid: Number(f[1]),
      own: Number(f[11]) + Number(f[12]),
      children: Number(f[13]) + Number(f[14]),
    };
  } catch {
    return undefined;
  }
}

/** CPU seconds used so far by `root`, its living children, and its exited children. */
export function treeCpuSeconds(root: number): number {
  const top = procStat(root);
  if (!top) return 0;
  let ticks = top.own + top.children;
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === root) continue;
    const s = procStat(pid);
    if (s?.ppid === root) ticks += s.own;
  }
  return ticks / TICKS_PER_SECOND;
}

/** CPU seconds of one process (no children). */
export function processCpuSeconds(pid: number): number {
  return (procStat(pid)?.own ?? 0) / TICKS_PER_SECOND;
}

/** Committed and rolled-back transactions of one database so far. */
export async function transactions(client: pg.Client, database: string): Promise<number> {
  const { rows } = await client.query<{ n: string }>(
    'SELECT (xact_commit + xact_rollback)::text AS n FROM pg_stat_database WHERE datname = $1',
    [database],
  );
  return Number(rows[0]?.n ?? 0);
}

/** The database's backends: all, and the LISTEN sessions among them (by application_name). */
export async function backends(
  client: pg.Client,
  database: string,
): Promise<{ total: number; listening: number }> {
  const { rows } = await client.query<{ total: number; listening: number }>(
    `SELECT count(*)::int AS total, count(*) FILTER (WHERE application_name LIKE '%-listen')::int AS listening
       FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`,
    [database],
  );
  return rows[0] ?? { total: 0, listening: 0 };
}

/** PgBouncer's view of one pool: clients, clients waiting, server connections. */
export async function bouncerPool(
  bouncer: PgBouncer,
  database: string,
): Promise<{ clients: number; waiting: number; servers: number }> {
  const pool = (await bouncer.pools()).find((p) => p.database === database);
  return {
    clients: (pool?.clActive ?? 0) + (pool?.clWaiting ?? 0),
    waiting: pool?.clWaiting ?? 0,
    servers: (pool?.svActive ?? 0) + (pool?.svIdle ?? 0) + (pool?.svUsed ?? 0),
  };
}

/** PgBouncer's totals for one database (SHOW STATS): transactions, their time and clients' waits (µs). */
export async function bouncerTotals(
  bouncer: PgBouncer,
  database: string,
): Promise<{ xacts: number; xactMicros: number; waitMicros: number }> {
  const row = (await bouncer.admin<Record<string, string | number>>('SHOW STATS')).find(
    (r) => r.database === database,
  );
  return {
    xacts: Number(row?.total_xact_count ?? 0),
    xactMicros: Number(row?.total_xact_time ?? 0),
    waitMicros: Number(row?.total_wait_time ?? 0),
  };
}

/** Server-side execution time per statement since the last reset (pg_stat_statements), by a name. */
export async function statementTimes(
  client: pg.Client,
  kinds: Record<string, string>,
): Promise<Record<string, { calls: number; meanMs: number; maxMs: number }>> {
  const out: Record<string, { calls: number; meanMs: number; maxMs: number }> = {};
  for (const [name, pattern] of Object.entries(kinds)) {
    const { rows } = await client.query<{ calls: string; mean: number | null; max: number | null }>(
      `SELECT coalesce(sum(calls), 0)::text AS calls, sum(total_exec_time) / nullif(sum(calls), 0) AS mean, max(max_exec_time) AS max
         FROM pg_stat_statements WHERE query LIKE $1`,
      [pattern],
    );
    const r = rows[0];
    out[name] = {
      calls: Number(r?.calls ?? 0),
      meanMs: Math.round((r?.mean ?? 0) * 100) / 100,
      maxMs: Math.round(r?.max ?? 0),
    };
  }
  return out;
}

/** The statements that took the most time in PostgreSQL since the last reset: what the CPU went to. */
export async function topStatements(
  client: pg.Client,
  limit = 8,
): Promise<{ query: string; calls: number; totalSeconds: number; meanMs: number }[]> {
  const { rows } = await client.query<{ query: string; calls: string; total: number; mean: number }>(
    `SELECT regexp_replace(left(query, 70), '\\s+', ' ', 'g') AS query, calls::text, total_exec_time / 1000 AS total, mean_exec_time AS mean
       FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT $1`,
    [limit],
  );
  return rows.map((r) => ({
    query: r.query,
    calls: Number(r.calls),
    totalSeconds: Math.round(r.total * 100) / 100,
    meanMs: Math.round(r.mean * 100) / 100,
  }));
}

/** Backends of the database waiting for a lock now (a row lock: a hot balance row, say). */
export async function lockWaiters(client: pg.Client, database: string): Promise<Map<string, number>> {
  const { rows } = await client.query<{ what: string; n: number }>(
    `SELECT wait_event || ': ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 40) AS what, count(*)::int AS n
       FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' GROUP BY 1`,
    [database],
  );
  return new Map(rows.map((r) => [r.what, r.n]));
}
