// What a run cost PostgreSQL (docs/scaling.md uses these figures): commits, change-feed rows,
// usage flushes and lease grants per gateway, connections by process kind.
import pg from 'pg';

export interface DbSnapshot {
  at: number;
  commits: number;
  changes: number;
  flushes: Record<string, number>;
  leases: Record<string, number>;
}
export async function dbSnapshot(url: string): Promise<DbSnapshot> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const one = async (sql: string) => Number((await db.query<{ v: string }>(sql)).rows[0]?.v ?? 0);
    const byGateway = async (table: string) =>
      Object.fromEntries(
        (
          await db.query<{ g: string; n: string }>(
            `SELECT gateway_id AS g, count(*)::text AS n FROM ${table} GROUP BY gateway_id`,
          )
        ).rows.map((r) => [r.g, Number(r.n)]),
      );
    return {
      at: Date.now() / 1000,
      commits: await one(
        'SELECT xact_commit::text AS v FROM pg_stat_database WHERE datname = current_database()',
      ),
      changes: await one('SELECT count(*)::text AS v FROM change_log'),
      flushes: await byGateway('usage_batches'),
      leases: await byGateway('bandwidth_leases'),
    };
  } finally {
    await db.end();
  }
}
export async function connectionsByApplication(url: string): Promise<Record<string, number>> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const { rows } = await db.query<{ app: string; n: string }>(
      `SELECT regexp_replace(application_name, '-[0-9]+$', '') AS app, count(*)::text AS n FROM pg_stat_activity
        WHERE datname = current_database() AND application_name LIKE 'proxyfleet-%' GROUP BY 1 ORDER BY 1`,
    );
    return Object.fromEntries(rows.map((r) => [r.app, Number(r.n)]));
  } finally {
    await db.end();
  }
}
