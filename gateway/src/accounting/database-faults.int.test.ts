// The database faults a pooled deployment meets (docs/adr/0068, 0069), on a private primary with a
// synchronous standby (test/pg-cluster.ts) behind a real PgBouncer, the gateway in transaction
// pooling as deployed: the server refusing connections (max_connections reached), PgBouncer
// restarted, the standby lagging (every commit waits for it). In each, a customer the gateway
// serves goes on from its lease and outage credit, one it never served is answered 503 (never
// 402), and every byte moved is billed exactly once when the fault is gone (docs/adr/0021).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '#common/db/migrate.ts';
import { createPool, sqlState, type Pool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { resetProxyPassword, type NewAccount } from '#common/accounts/accounts.ts';
import { accountWithBandwidth, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, startTestGateway } from '#test/gateway/fixture.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { fold, recordedUsage } from '#test/gateway/usage.ts';
import { PgCluster } from '#test/pg-cluster.ts';
import { startProxyfleetBouncer, type ProxyfleetBouncer } from '#test/pgbouncer.ts';
import { until } from '#test/process.ts';

/** Short, so that a commit stuck behind the standby fails the query in seconds. */
const QUERY_TIMEOUT_MS = 3_000;
const MAX_CONNECTIONS = 40;
const DATABASE = 'proxyfleet';
const silent = createLogger('test', 'silent');

let dir: string;
let primary: PgCluster;
let standby: PgCluster;
let pgb: ProxyfleetBouncer;
/** The fixtures' and the checks' own connection, straight to the server. */
let direct: Pool;
let pooled: Pool;
let origin: Origin;
let gateway: Awaited<ReturnType<typeof startTestGateway>>;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'pf-db-faults-'));
  primary = await PgCluster.init(dir, 'primary', { max_connections: MAX_CONNECTIONS });
  await primary.query(`CREATE DATABASE ${DATABASE}`);
  const url = primary.url(DATABASE);
  await migrate(url);
  standby = await PgCluster.replicaOf(primary, dir, 'standby');
  await primary.setSynchronousStandbys('standby');
  pgb = await startProxyfleetBouncer(url, { statementTimeoutMs: QUERY_TIMEOUT_MS - 1_000 });
  direct = createPool({ url, max: 3, applicationName: 'proxyfleet-test', logger: silent });
  pooled = createPool({
    url: pgb.pooledUrl,
    max: 4,
    applicationName: 'proxyfleet-gateway',
    logger: silent,
    pooling: 'transaction',
    queryTimeoutMs: QUERY_TIMEOUT_MS,
  });
  origin = await startOrigin();
  gateway = await startTestGateway(pooled, pgb.sessionUrl, gatewaySpec('basic'));
}, 120_000);

afterAll(async () => {
  await gateway?.close();
  await origin?.close();
  await pooled?.end();
  await direct?.end();
  await pgb?.bouncer.stop();
  await standby?.remove();
  await primary?.remove();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A customer's requests through the gateway, and the bytes of those it was served. */
function customer(account: { proxyUsername: string; proxyPassword: string }) {
  const moved = { up: 0, down: 0, requests: 0 };
  return {
    moved,
    async request(bytes = 1_000, password = account.proxyPassword): Promise<number> {
      const auth = basicAuth(account.proxyUsername, password);
      const r = await rawExchange(gateway.port, [
        get(`http://127.0.0.1:${origin.port}/bytes/${bytes}`, auth),
      ]);
      const status = r.responses[0]?.status ?? 0;
      if (status === 200) {
        moved.up += r.written;
        moved.down += r.read;
        moved.requests += 1;
      }
      return status;
    },
  };
}

/**
 * Two customers the gateway knows: `known`, who is served before the fault (his requests through
 * `k`), and `stranger`, who is not.
 */
async function knownAndStranger() {
  const known = await accountWithBandwidth(direct, { basic: 1_000_000_000 });
  const stranger = await accountWithBandwidth(direct, { basic: 1_000_000_000 });
  await cacheSynced(direct, [gateway]);
  return { known, stranger, k: customer(known) };
}

/** During the fault: `k` is served past his first lease on outage credit, the stranger gets 503. */
async function servedOnCreditOnly(k: ReturnType<typeof customer>, stranger: NewAccount): Promise<void> {
  // Past the first lease (256 KiB) on outage credit.
  for (let i = 0; i < 3; i++) expect(await k.request(400_000)).toBe(200);
  expect(await customer(stranger).request()).toBe(503);
  await gateway.ledger.flush();
  expect(gateway.ledger.degraded).toBe(true);
}

/** Once the fault is gone, the stranger is served (within 30 s). */
async function strangerServed(stranger: NewAccount): Promise<void> {
  await until(async () => (await customer(stranger).request()) === 200, 'the stranger to be served', 30_000);
}

/**
 * Once the fault is gone: the usage of `c` reaches the database in full and once (a retried batch
 * keeps its key), and the fold charges exactly that.
 */
async function billedOnce(
  accountId: string,
  moved: { up: number; down: number; requests: number },
): Promise<void> {
  let usage = await recordedUsage(direct, accountId);
  await until(
    async () => {
      await gateway.ledger.flush();
      usage = await recordedUsage(direct, accountId);
      return usage.up >= moved.up && usage.down >= moved.down;
    },
    'the usage kept during the fault to be written',
    30_000,
  );
  expect(usage).toEqual(moved);
  await fold(direct);
  const { rows } = await direct.query<{ used: number }>(
    "SELECT used_bytes AS used FROM balances WHERE account_id = $1 AND product = 'basic'",
    [accountId],
  );
  expect(rows[0]!.used).toBe(moved.up + moved.down);
}

describe('database faults behind PgBouncer', () => {
  it('the server refusing connections (max_connections reached)', async () => {
    const { known, stranger, k } = await knownAndStranger();
    expect(await k.request()).toBe(200);
    const fillers = await exhaustConnections();
    try {
      // PgBouncer cannot log in to the server (53300): its server connections were ended.
      const refused = new pg.Client({ connectionString: primary.url() });
      await expect(refused.connect()).rejects.toMatchObject({ code: '53300' });
      await servedOnCreditOnly(k, stranger);
    } finally {
      await Promise.all(fillers.map((c) => c.end().catch(() => undefined)));
    }
    await strangerServed(stranger);
    await billedOnce(known.id, k.moved);
  }, 120_000);

  it('PgBouncer restarted', async () => {
    const { known, stranger, k } = await knownAndStranger();
    let password = known.proxyPassword;
    expect(await k.request()).toBe(200);
    await pgb.bouncer.stopProcess();
    try {
      await servedOnCreditOnly(k, stranger);
      // A password reset while the gateway cannot hear of it: the feed's catch-up brings it.
      password = await resetProxyPassword(direct, known.id, TEST_CREDENTIALS_KEY);
    } finally {
      await pgb.bouncer.restart();
    }
    await until(
      async () => (await k.request(1_000, password)) === 200,
      'the new password to be accepted',
      30_000,
    );
    expect(await k.request()).toBe(407);
    await strangerServed(stranger);
    await billedOnce(known.id, k.moved);
  }, 120_000);

  it('the synchronous standby lagging: every commit waits for it', async () => {
    const { known, stranger, k } = await knownAndStranger();
    expect(await k.request()).toBe(200);
    // The standby stops receiving: the primary's commits wait for its acknowledgement.
    const receiver = await standby.walReceiverPid();
    expect(receiver).toBeGreaterThan(0);
    process.kill(receiver!, 'SIGSTOP');
    try {
      await servedOnCreditOnly(k, stranger);
      // The flush that timed out on the client is committed on the primary, waiting for the standby.
      await until(async () => (await syncRepWaiters()) > 0, 'a commit to wait for the standby');
    } finally {
      process.kill(receiver!, 'SIGCONT');
    }
    await until(async () => (await syncRepWaiters()) === 0, 'the waiting commits to complete', 30_000);
    await strangerServed(stranger);
    // The retried flush carried the timed-out batch's key: a no-op where that batch landed.
    await billedOnce(known.id, k.moved);
  }, 120_000);
});

async function syncRepWaiters(): Promise<number> {
  const [row] = await primary.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
  );
  return row?.n ?? 0;
}

/**
 * Ends every session of the database (PgBouncer's server connections, the change feed's) and
 * takes every connection slot of the server, so that nothing can log in (53300) until released.
 */
async function exhaustConnections(): Promise<pg.Client[]> {
  const fillers: pg.Client[] = [];
  for (let round = 0; round < 20; round++) {
    let added = 0;
    for (;;) {
      const c = new pg.Client({ connectionString: primary.url() });
      c.on('error', () => undefined);
      try {
        await c.connect();
      } catch (err) {
        if (sqlState(err) === '53300') break;
        throw err;
      }
      fillers.push(c);
      added++;
    }
    // The database's sessions are ended; their slots (freed once each backend has exited) are
    // taken in the next round, until a round finds the server full and nobody else on it.
    const { rows } = await fillers[0]!.query<{ n: number }>(
      "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
      [DATABASE],
    );
    if (rows[0]!.n === 0 && added === 0) return fillers;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the database kept getting connections while its slots were taken');
}
