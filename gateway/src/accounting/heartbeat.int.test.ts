// The reclaim of a dead gateway's leases (migrations/0080, docs/adr/0025), in SQL against a real
// PostgreSQL: who reclaims, what is kept, and what a gateway that was only cut off does when it
// comes back (its late flush and release must not count anything twice or go negative).
import { describe, expect, it } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import { useTestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { fold } from '#test/gateway/usage.ts';
import type { ExitReport } from '../proxy/exits.ts';
import { GatewayHeartbeat } from './heartbeat.ts';

const fx = useTestDatabase();
const logger = createLogger('test', 'silent');

const MIN = 262_144;

async function acquire(accountId: string, gateway: string, wanted: number) {
  const { rows } = await fx.db.pool.query<{ out_lease_id: string | null; out_granted: number }>(
    'SELECT * FROM lease_acquire($1, $2, $3, $4, $5, $6)',
    [accountId, 'basic', gateway, wanted, MIN, 300],
  );
  return rows[0]!;
}

async function beat(gateway: string, boot = `${gateway}-boot`) {
  const { rows } = await fx.db.pool.query<{ out_live: number; out_was_dead: boolean }>(
    'SELECT * FROM gateway_heartbeat($1, $2, $3)',
    [gateway, 'basic', boot],
  );
  return rows[0]!;
}

/** The gateway's last heartbeat, `seconds` ago (what a SIGKILL leaves after that long). */
async function silence(gateway: string, seconds: number) {
  await fx.db.pool.query(
    `UPDATE gateway_heartbeats SET beat_at = now() - make_interval(secs => $2) WHERE gateway_id = $1`,
    [gateway, seconds],
  );
}

async function record(
  key: string,
  gateway: string,
  accountId: string,
  spends: [string, number][],
  releases: [string, number][],
) {
  const bytes = spends.reduce((sum, [, n]) => sum + n, 0);
  await fx.db.pool.query('SELECT usage_record($1, $2, $3, $4, $5)', [
    key,
    gateway,
    JSON.stringify([
      { account_id: accountId, product: 'basic', bytes_up: 0, bytes_down: bytes, requests: 1 },
    ]),
    JSON.stringify(spends.map(([lease_id, n]) => ({ lease_id, bytes: n }))),
    JSON.stringify(releases.map(([lease_id, spent]) => ({ lease_id, spent }))),
  ]);
}

/** The balance, and what its leases hold by the rule of migrations/0020 (they must agree). */
async function ledger(accountId: string) {
  const { rows } = await fx.db.pool.query<{
    total_bytes: number;
    used_bytes: number;
    leased_bytes: number;
    held: number;
    open: number;
  }>(
    `SELECT b.total_bytes, b.used_bytes, b.leased_bytes,
            coalesce((SELECT sum(CASE WHEN l.released_at IS NULL THEN l.granted_bytes - l.charged_bytes
                                      ELSE greatest(0, least(l.spent_bytes, l.granted_bytes) - l.charged_bytes) END)
                        FROM bandwidth_leases l WHERE l.account_id = b.account_id AND l.product = b.product), 0)::bigint AS held,
            (SELECT count(*)::int FROM bandwidth_leases l
              WHERE l.account_id = b.account_id AND l.product = b.product AND l.released_at IS NULL) AS open
       FROM balances b WHERE b.account_id = $1 AND b.product = 'basic'`,
    [accountId],
  );
  return rows[0]!;
}

describe('reclaiming the leases of a gateway that stopped heartbeating', () => {
  it('lease_acquire on another gateway reclaims them once the heartbeat is over 30 s old, keeping what was flushed', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 2_000_000 });
    await beat('gw-a');
    await beat('gw-b');
    const a = await acquire(account.id, 'gw-a', 1_000_000);
    const a2 = await acquire(account.id, 'gw-a', 1_000_000);
    expect(a.out_granted + a2.out_granted).toBe(1_500_000); // 1 MB, then half of what was left
    await record('gw-a:1', 'gw-a', account.id, [[a.out_lease_id!, 300_000]], []);
    // gw-a draws until nothing is free; gw-b gets nothing while gw-a is alive, even 25 s after its
    // last beat. (Not 29 s: the acquire's now() is a later transaction's, and a busy database can
    // put a second between the two, making the beat over 30 s old.)
    for (let i = 0; i < 10 && (await acquire(account.id, 'gw-a', 1_000_000)).out_granted > 0; i++);
    const drawn = await ledger(account.id);
    expect(drawn.total_bytes - drawn.leased_bytes).toBe(0);
    await silence('gw-a', 25);
    expect((await acquire(account.id, 'gw-b', 1_000_000)).out_granted).toBe(0);

    await silence('gw-a', 31);
    const b = await acquire(account.id, 'gw-b', 1_000_000);
    // Back: everything but the 300 KB gw-a flushed (held until folded, then used).
    expect(b.out_granted).toBe(850_000); // half of the 1.7 MB free
    const after = await ledger(account.id);
    expect(after.open).toBe(1);
    expect(after.leased_bytes).toBe(after.held);
    expect(after.leased_bytes).toBe(300_000 + 850_000);
    await fold(fx.db.pool);
    const folded = await ledger(account.id);
    expect(folded).toMatchObject({ used_bytes: 300_000, leased_bytes: 850_000, held: 850_000 });
  });

  it('a gateway that was only cut off comes back: its late flush and release count once, nothing goes negative', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 4_000_000 });
    await beat('gw-c');
    await beat('gw-d');
    const c = await acquire(account.id, 'gw-c', 1_000_000);
    await record('gw-c:1', 'gw-c', account.id, [[c.out_lease_id!, 100_000]], []);
    await silence('gw-c', 45);
    // Reclaimed by the worker's reaper this time (the other path), with the flushed 100 KB kept.
    const { rows } = await fx.db.pool.query<{ n: number }>('SELECT lease_reap(1000) AS n');
    expect(rows[0]!.n).toBe(1);
    expect(await ledger(account.id)).toMatchObject({ leased_bytes: 100_000, held: 100_000, open: 0 });
    await acquire(account.id, 'gw-d', 4_000_000);

    // gw-c's network is back. It had spent 400 KB more on its lease while cut off; its retried
    // flush reports them and returns the lease (spent 500 KB), then it flushes once more.
    expect(await beat('gw-c')).toMatchObject({ out_was_dead: true });
    await record('gw-c:2', 'gw-c', account.id, [[c.out_lease_id!, 400_000]], [[c.out_lease_id!, 500_000]]);
    await record('gw-c:2', 'gw-c', account.id, [[c.out_lease_id!, 400_000]], [[c.out_lease_id!, 500_000]]); // a retry
    await fx.db.pool.query('SELECT lease_release($1, $2)', [c.out_lease_id, 500_000]); // idempotent
    const late = await ledger(account.id);
    expect(late.leased_bytes).toBe(late.held);
    await fold(fx.db.pool);
    const settled = await ledger(account.id);
    // Every byte gw-c reported is used (billed once); the lease charged only what it still held.
    expect(settled.used_bytes).toBe(500_000);
    expect(settled.leased_bytes).toBe(settled.held);
    expect(settled.leased_bytes).toBeGreaterThanOrEqual(0);
    const lease = await fx.db.pool.query<{ charged_bytes: number; spent_bytes: number }>(
      'SELECT charged_bytes, spent_bytes FROM bandwidth_leases WHERE id = $1',
      [c.out_lease_id],
    );
    // The release at reclaim (100 KB) stands; the late 400 KB were over-granted (docs/adr/0025).
    expect(lease.rows[0]).toEqual({ charged_bytes: 100_000, spent_bytes: 100_000 });
    // Releasing everything that is left brings the balance back to exactly what was used.
    await fx.db.pool.query(
      `SELECT lease_release(id, 0) FROM bandwidth_leases WHERE account_id = $1 AND released_at IS NULL`,
      [account.id],
    );
    expect(await ledger(account.id)).toMatchObject({ leased_bytes: 0, held: 0, used_bytes: 500_000 });
  });

  it('leases of a gateway with no heartbeat row, or a fresh one, are left alone', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000 });
    await beat('gw-e');
    const legacy = await acquire(account.id, 'gw-legacy', 1_000_000); // never heartbeats
    const alive = await acquire(account.id, 'gw-e', 1_000_000);
    expect(legacy.out_granted).toBeGreaterThan(0);
    expect(alive.out_granted).toBeGreaterThan(0);
    await fx.db.pool.query('SELECT lease_reap(1000)');
    expect((await ledger(account.id)).open).toBe(2);
  });

  it('a restarted process with the same id reclaims what the earlier one left open, and a clean stop leaves nothing', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000 });
    const first = await GatewayHeartbeat.start({
      pool: fx.db.pool,
      gatewayId: 'gw-f',
      plan: 'basic',
      logger,
    });
    const lease = await acquire(account.id, 'gw-f', 600_000);
    expect(lease.out_granted).toBe(500_000);
    // SIGKILL: `first` never stops; its container restarts under the same pod name at once.
    const second = await GatewayHeartbeat.start({
      pool: fx.db.pool,
      gatewayId: 'gw-f',
      plan: 'basic',
      logger,
    });
    expect(second.bootId).not.toBe(first.bootId);
    expect(await ledger(account.id)).toMatchObject({ leased_bytes: 0, open: 0 });
    // The earlier process (a stale duplicate) stopping does not remove the new one's row.
    await first.stop();
    await acquire(account.id, 'gw-f', 600_000);
    await second.stop();
    expect(await ledger(account.id)).toMatchObject({ leased_bytes: 0, open: 0 });
    const rows = await fx.db.pool.query(`SELECT 1 FROM gateway_heartbeats WHERE gateway_id = 'gw-f'`);
    expect(rows.rowCount).toBe(0);
  });

  it('counts the live gateways of its plan with each heartbeat', async () => {
    await fx.db.pool.query('DELETE FROM gateway_heartbeats');
    const hb = await GatewayHeartbeat.start({ pool: fx.db.pool, gatewayId: 'gw-g', plan: 'basic', logger });
    expect(hb.liveGateways()).toBe(1);
    await beat('gw-h');
    await beat('gw-i');
    await fx.db.pool.query(
      `INSERT INTO gateway_heartbeats (gateway_id, plan, boot_id) VALUES ('gw-other-plan', 'mobile', 'x')`,
    );
    await hb.beat();
    expect(hb.liveGateways()).toBe(3);
    await silence('gw-i', 31);
    await hb.beat();
    expect(hb.liveGateways()).toBe(2);
    await hb.stop();
  });
});

describe("the exits' health on the heartbeat (migrations/0175, docs/adr/0117)", () => {
  const exitsOf = async (gateway: string) =>
    (
      await fx.db.pool.query<{ exits: unknown }>(
        'SELECT exits FROM gateway_heartbeats WHERE gateway_id = $1',
        [gateway],
      )
    ).rows[0]?.exits;

  it('each beat writes what the gateway reports, in the same statement; none before the gateway reports', async () => {
    const hb = await GatewayHeartbeat.start({
      pool: fx.db.pool,
      gatewayId: 'gw-exits',
      plan: 'basic',
      logger,
    });
    await hb.beat();
    expect(await exitsOf('gw-exits')).toBeNull();
    let report: ExitReport[] = [{ n: 'us-1', s: 'ok', ls: 1_700_000_000 }];
    hb.reportExits(() => report);
    await hb.beat();
    expect(await exitsOf('gw-exits')).toEqual([{ n: 'us-1', s: 'ok', ls: 1_700_000_000 }]);
    report = [{ n: 'us-1', s: 'missing', ls: 1_700_000_000 }];
    await hb.beat();
    expect(await exitsOf('gw-exits')).toEqual([{ n: 'us-1', s: 'missing', ls: 1_700_000_000 }]);
    // A restarted process starts with no report: the earlier one's exits are not its own.
    const next = await GatewayHeartbeat.start({
      pool: fx.db.pool,
      gatewayId: 'gw-exits',
      plan: 'basic',
      logger,
    });
    expect(await exitsOf('gw-exits')).toBeNull();
    await next.stop();
    await hb.stop();
  });

  it('a gateway of the previous release keeps beating through gateway_heartbeat, reporting no exits', async () => {
    await fx.db.pool.query(
      `SELECT * FROM gateway_heartbeat_v2('gw-old', 'basic', 'b', '[{"n":"x","s":"ok"}]')`,
    );
    expect(await beat('gw-old', 'b')).toEqual({ out_live: expect.any(Number), out_was_dead: false });
    expect(await exitsOf('gw-old')).toBeNull();
    await silence('gw-old', 31);
    expect(await beat('gw-old', 'b')).toMatchObject({ out_was_dead: true });
  });

  it('refuses exits that are not an array', async () => {
    await expect(
      fx.db.pool.query(`SELECT * FROM gateway_heartbeat_v2('gw-bad', 'basic', 'b', '{"n":"x"}')`),
    ).rejects.toThrow(/gateway_heartbeats_exits_array/);
  });
});

describe('leases stranded by a gateway that stopped heartbeating', () => {
  const stranded = async (accountId: string) =>
    Number(
      (await fx.db.pool.query<{ n: string }>(`SELECT lease_stranded($1, 'basic') AS n`, [accountId])).rows[0]!
        .n,
    );

  it('counts a silent gateway against the others that beat, not against a database that was away', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10 * MIN });
    await beat('strand-a');
    await beat('strand-b');
    const lease = await acquire(account.id, 'strand-b', 4 * MIN);
    // A failover of about 10 s: no gateway could beat, every row is as old. All live.
    await fx.db.pool.query(`UPDATE gateway_heartbeats SET beat_at = now() - interval '12 seconds'`);
    expect(await stranded(account.id)).toBe(0);
    // The database is back and gateway a beats again; b does not: its lease is stranded.
    await beat('strand-a');
    expect(await stranded(account.id)).toBe(Number(lease.out_granted));
  });
});
