// The failover scenario's judgements after each phase, through Prometheus and the database
// (docs/loadtest.md, "Failover and switchover"): every byte billed once, no purchase or refill
// bought twice, no lease stranded, the fleet serving again without a restart.
import pg from 'pg';
import { z } from 'zod';
import type { Fleet } from '../fleet/fleet.ts';
import type { Prometheus } from '../prom.ts';
import { admin, accountSchema, gatewayRequest, type Account } from '../run/clients.ts';
import { sleep } from '../run/context.ts';
import type { Report } from './report.ts';

/** A query on the fleet's database (directly, wherever it is now). */
export async function dbQuery<R extends pg.QueryResultRow>(
  fleet: Fleet,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: fleet.databaseUrl, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(sql, params)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Waits until the gateways' last flushes are in and folded: no unfolded batch, and the billed
 * counters unchanged over two Prometheus scrapes. Returns the billed bytes per plan.
 */
export async function settle(fleet: Fleet, prom: Prometheus): Promise<Record<string, number>> {
  const billed = async () =>
    Object.fromEntries(
      (await prom.query('sum by (plan) (proxyfleet_gateway_billed_bytes_total)')).map((s) => [
        s.labels.plan ?? '',
        s.value,
      ]),
    );
  const deadline = Date.now() + 60_000;
  let last = JSON.stringify(await billed());
  for (;;) {
    await sleep(3_000);
    const [row] = await dbQuery<{ n: number }>(
      fleet,
      'SELECT count(*)::int AS n FROM usage_batches WHERE folded_at IS NULL',
    );
    const now = JSON.stringify(await billed());
    if ((row?.n === 0 && now === last) || Date.now() > deadline)
      return JSON.parse(now) as Record<string, number>;
    last = now;
  }
}

/** Every byte billed (Prometheus) is in the database once: used bytes per plan equal the counters. */
export async function judgeBilledOnce(
  report: Report,
  fleet: Fleet,
  billed: Record<string, number>,
  phase: string,
  soft: boolean,
): Promise<void> {
  const used = Object.fromEntries(
    (
      await dbQuery<{ product: string; used: string }>(
        fleet,
        'SELECT product, sum(used_bytes)::text AS used FROM balances GROUP BY product',
      )
    ).map((r) => [r.product, Number(r.used)]),
  );
  const plans = Object.keys(billed).sort();
  const diffs = plans.map((p) => `${p}: billed ${billed[p]}, in the database ${used[p] ?? 0}`);
  report.judge(
    `${phase}: every billed byte is in the database once (used bytes = the gateways' billed counters)`,
    plans.length > 0 && plans.every((p) => (used[p] ?? 0) === billed[p]),
    diffs.join('; '),
    soft,
  );
  const [dup] = await dbQuery<{ n: number; batches: number }>(
    fleet,
    `SELECT (SELECT count(*) FROM (SELECT idempotency_key FROM usage_batches GROUP BY 1 HAVING count(*) > 1) d)::int AS n,
            (SELECT count(*) FROM usage_batches)::int AS batches`,
  );
  report.judge(
    `${phase}: no usage batch applied twice`,
    dup?.n === 0,
    `${dup?.n} duplicated keys among ${dup?.batches} batches`,
  );
}

/** Each purchase key bought once; each auto-refill once, with its own purchase. */
export async function judgeBoughtOnce(
  report: Report,
  fleet: Fleet,
  phase: string,
  buyer: { account: Account; keys: string[]; bytes: number },
  refiller: { account: Account; initial: number; refill: number },
): Promise<void> {
  const bought = await dbQuery<{ key: string; n: number; total: string }>(
    fleet,
    `SELECT idempotency_key AS key, count(*)::int AS n, sum(bytes)::text AS total FROM purchases
      WHERE account_id = $1 AND idempotency_key = ANY ($2) GROUP BY 1`,
    [buyer.account.id, buyer.keys],
  );
  const twice = bought.filter((b) => b.n > 1);
  const [total] = await dbQuery<{ total: string }>(
    fleet,
    'SELECT coalesce(sum(total_bytes), 0)::text AS total FROM balances WHERE account_id = $1',
    [buyer.account.id],
  );
  report.judge(
    `${phase}: every purchase bought once (Idempotency-Key, retried through the outage)`,
    twice.length === 0 &&
      bought.length === buyer.keys.length &&
      Number(total?.total) === buyer.keys.length * buyer.bytes,
    `${buyer.keys.length} keys, ${bought.length} bought, ${twice.length} twice; balance ${total?.total} = ${buyer.keys.length} x ${buyer.bytes}`,
  );
  const [r] = await dbQuery<{
    refills: number;
    succeeded: number;
    keys: number;
    purchases: number;
    total: string;
  }>(
    fleet,
    `SELECT (SELECT count(*) FROM auto_refills WHERE account_id = $1)::int AS refills,
            (SELECT count(*) FROM auto_refills WHERE account_id = $1 AND status = 'succeeded')::int AS succeeded,
            (SELECT count(DISTINCT idempotency_key) FROM auto_refills WHERE account_id = $1)::int AS keys,
            (SELECT count(*) FROM purchases WHERE account_id = $1 AND source = 'auto_refill')::int AS purchases,
            (SELECT total_bytes FROM balances WHERE account_id = $1 AND product = 'basic')::text AS total`,
    [refiller.account.id],
  );
  const expectTotal = refiller.initial + (r?.succeeded ?? 0) * refiller.refill;
  report.judge(
    `${phase}: every auto-refill bought once`,
    r !== undefined &&
      r.refills > 0 &&
      r.keys === r.refills &&
      r.purchases === r.succeeded &&
      Number(r.total) === expectTotal,
    `${r?.refills} refills (${r?.succeeded} succeeded, ${r?.keys} distinct crossings), ${r?.purchases} refill purchases; total ${r?.total} = ${refiller.initial} + ${r?.succeeded} x ${refiller.refill}`,
  );
}

/** No open lease past its TTL, none held by a gateway the database judges dead (docs/adr/0025). */
export async function judgeLeases(report: Report, fleet: Fleet, phase: string): Promise<void> {
  const [row] = await dbQuery<{ open: number; expired: number; dead: number }>(
    fleet,
    `SELECT count(*) FILTER (WHERE l.released_at IS NULL)::int AS open,
            count(*) FILTER (WHERE l.released_at IS NULL AND l.expires_at < now() - interval '30 seconds')::int AS expired,
            count(*) FILTER (WHERE l.released_at IS NULL AND (h.gateway_id IS NULL OR h.beat_at < now() - gateway_dead_after()))::int AS dead
       FROM bandwidth_leases l LEFT JOIN gateway_heartbeats h ON h.gateway_id = l.gateway_id`,
  );
  report.judge(
    `${phase}: no lease stranded past 30 s`,
    row?.expired === 0 && row.dead === 0,
    `${row?.open} open leases, all of live gateways; ${row?.expired} past their TTL by 30 s, ${row?.dead} of dead gateways`,
  );
}

const readySchema = z.object({ ready: z.boolean() });

/**
 * The API and every gateway serve again with the processes they had: a customer created now (the
 * API writes) is served by each gateway directly (the change feed is back, leases draw).
 */
export async function judgeServesAgain(
  report: Report,
  fleet: Fleet,
  phase: string,
  pidsBefore: number[],
  origin: string,
): Promise<number> {
  const started = Date.now();
  const z1 = accountSchema.parse(
    await admin(fleet, 'POST', '/admin/v1/accounts', { email: `after-${phase}-${started}@loadtest.example` }),
  );
  await admin(fleet, 'POST', `/admin/v1/accounts/${z1.id}/purchases`, { product: 'basic', gb: 1 });
  await admin(fleet, 'POST', `/admin/v1/accounts/${z1.id}/purchases`, { product: 'advanced', gb: 1 });
  const p = fleet.ports;
  const gateways = [
    ...p.basicGateways.map((port) => ({ port, basic: true })),
    ...p.advancedGateways.map((port) => ({ port, basic: false })),
  ];
  const statuses: number[] = [];
  for (const g of gateways) {
    let status = 0;
    while (Date.now() - started < 20_000) {
      const cred = `${z1.proxyUsername}:${z1.proxyPassword}${g.basic ? '_country-us' : ''}`;
      status = (await gatewayRequest(g.port, cred, `${origin}/bytes/100`).catch(() => ({ status: 0 })))
        .status;
      if (status === 200) break;
      await sleep(100);
    }
    statuses.push(status);
  }
  const apis = await Promise.all(
    p.apis.map(async (port) => {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(5000) });
      return readySchema.parse(await res.json()).ready;
    }),
  );
  const pids = fleet.pids();
  const same = pidsBefore.length === pids.length && pidsBefore.every((x) => pids.includes(x));
  const ms = Date.now() - started;
  report.judge(
    `${phase}: the API and all 4 gateways serve again without a restart`,
    statuses.every((s) => s === 200) && apis.every(Boolean) && same,
    `a customer created after it served by every gateway (${statuses.join(', ')}) ${ms} ms after its creation; APIs ready ${apis.join(', ')}; processes ${same ? 'the same' : `changed: ${pidsBefore.join(' ')} -> ${pids.join(' ')}`}`,
  );
  return ms;
}

/**
 * The shape of the usage batches the gateways wrote (docs/scaling.md: the database load generator
 * writes the same): lines (customers) and lease spends per batch, per plan's gateways.
 */
export async function batchShapes(fleet: Fleet): Promise<string> {
  const rows = await dbQuery<{ plan: string; batches: number; lines: string; spends: string }>(
    fleet,
    `SELECT split_part(b.gateway_id, '-', 2) AS plan, count(*)::int AS batches,
            round(avg((SELECT count(*) FROM usage_batch_lines l WHERE l.batch_id = b.id)), 2)::text AS lines,
            round(avg((SELECT count(*) FROM usage_batch_lease_spend s WHERE s.batch_id = b.id)), 2)::text AS spends
       FROM usage_batches b GROUP BY 1 ORDER BY 1`,
  );
  return rows
    .map((r) => `${r.plan}: ${r.batches} batches, ${r.lines} lines and ${r.spends} lease spends each`)
    .join('; ');
}
