// Remaining = bought - used, end to end: real gateway processes (one, and three), the real worker
// process, the API and a real SMTP server. Bytes a gateway holds in a lease are not spent: they
// neither buy refills nor send alerts (docs/api.md "Remaining bandwidth", docs/adr/0073).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_ADMIN_TOKEN, accountWithAutoRefill } from '#test/fixtures.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import { startWorkerProcess } from '#test/worker.ts';
import { stopProcess, until, type RunningProcess } from '#test/process.ts';
import { addresses, startTestSmtpServer, type TestSmtpServer } from '#test/smtp.ts';
import { cacheSynced, gatewaySpec } from '#test/gateway/fixture.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { basicAuth, download } from '#test/gateway/client.ts';
import { spawnGateway, type GatewayProcess } from '#test/gateway/process.ts';

const MB = 1e6;

let db: TestDatabase;
let origin: Origin;
let smtp: TestSmtpServer;
let api: TestApi;
let worker: RunningProcess | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  origin = await startOrigin();
  smtp = await startTestSmtpServer();
  api = await startTestApi(db, { env: { PROXYFLEET_USAGE_REFRESH_SECONDS: '1' } });
  worker = await startWorkerProcess(db.url, { PROXYFLEET_SMTP_URL: smtp.url });
}, 60_000);

afterAll(async () => {
  await stopProcess(worker);
  await api?.close();
  await smtp?.close();
  await origin?.close();
  await db?.drop();
});

/** Waits until every byte the gateways relayed is flushed and folded: used stops short of nothing. */
async function settled(accountId: string, atLeast: number): Promise<number> {
  let used = 0;
  await until(async () => {
    const { rows } = await db.pool.query<{ used: number; unfolded: number }>(
      `SELECT coalesce((SELECT used_bytes FROM balances WHERE account_id = $1 AND product = 'basic'), 0) AS used,
              (SELECT count(*)::int FROM usage_batches WHERE folded_at IS NULL) AS unfolded`,
      [accountId],
    );
    used = rows[0]!.used;
    return used >= atLeast && rows[0]!.unfolded === 0;
  }, `${atLeast} bytes folded`);
  return used;
}

const refills = async (accountId: string) =>
  (
    await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM purchases WHERE account_id = $1 AND source = 'auto_refill'`,
      [accountId],
    )
  ).rows[0]!.n;

async function fleet(n: number, label: string): Promise<GatewayProcess[]> {
  const pods: GatewayProcess[] = [];
  for (let i = 0; i < n; i++)
    pods.push(await spawnGateway(db.url, gatewaySpec('basic'), { PROXYFLEET_GATEWAY_ID: `${label}-${i}` }));
  await cacheSynced(db.pool, n);
  return pods;
}

describe.each([1, 3])('remaining = bought - used through %i gateway process(es)', (gateways) => {
  let pods: GatewayProcess[] = [];
  beforeAll(async () => {
    pods = await fleet(gateways, `remaining-${gateways}`);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(pods.map((p) => p.stop('SIGTERM')));
  });
  const pod = (i: number) => pods[i % pods.length]!;
  /** 30 MB bought, a 50 MB auto-refill below 20 MB remaining (5 a month), known to the gateways. */
  async function customer() {
    const account = await accountWithAutoRefill(db.pool, 30 * MB, {
      thresholdGb: 0.02,
      refillGb: 0.05,
      maxRefillsPerMonth: 5,
    });
    await cacheSynced(db.pool, gateways);
    return { account, auth: basicAuth(account.proxyUsername, account.proxyPassword) };
  }

  it('30 MB bought, threshold 20 MB, refill 50 MB: two 12.5 MB downloads buy 1 refill, 50 MB more make it 2', async () => {
    const { account, auth } = await customer();
    const twice = (a: number, b: number) =>
      Promise.all([
        download(pod(a).port, origin.port, auth, 12.5 * MB),
        download(pod(b).port, origin.port, auth, 12.5 * MB),
      ]);
    expect(await twice(0, 1)).toEqual([200, 200]);
    await settled(account.id, 25 * MB);
    expect(await refills(account.id)).toBe(1);
    expect(await twice(1, 2)).toEqual([200, 200]);
    expect(await twice(2, 0)).toEqual([200, 200]);
    const used = await settled(account.id, 75 * MB);
    expect(await refills(account.id)).toBe(2);
    process.stdout.write(
      `remaining, ${gateways} gateway(s): 1 refill at 25 MB used, 2 at ${used} bytes used\n`,
    );
  }, 120_000);

  it('no refill while remaining stays above the threshold: many small requests on every gateway, then 8 MB', async () => {
    const { account, auth } = await customer();
    // Each gateway draws a lease for its first request; nothing much is used.
    for (let i = 0; i < 3 * gateways; i++)
      expect(await download(pod(i).port, origin.port, auth, 1_000)).toBe(200);
    expect(await download(pod(0).port, origin.port, auth, 8 * MB)).toBe(200);
    await settled(account.id, 8 * MB);
    expect(await refills(account.id)).toBe(0);
  }, 120_000);
});

describe('low-bandwidth alerts state what /api/v1/usage says', () => {
  let pods: GatewayProcess[] = [];
  beforeAll(async () => {
    pods = await fleet(1, 'alerts');
  }, 60_000);
  afterAll(async () => {
    await Promise.all(pods.map((p) => p.stop('SIGTERM')));
  });

  async function customer(percent: number) {
    const account = await accountWithBandwidth(db.pool, { basic: 20 * MB });
    const set = await call(api.url, `/admin/v1/accounts/${account.id}/alerts`, {
      method: 'PUT',
      admin: TEST_ADMIN_TOKEN,
      body: { lowBandwidthPercent: percent },
    });
    expect(set.status).toBe(200);
    await cacheSynced(db.pool, 1);
    return account;
  }
  const mails = (email: string) =>
    smtp.messages.filter(
      (m) => addresses(m.to).includes(email) && /^Low |bandwidth is used up$/.test(m.subject ?? ''),
    );
  /** Remaining per a fresh /api/v1/usage (the snapshot is recomputed after 1 s). */
  async function apiRemainingMb(key: string): Promise<number> {
    await new Promise((r) => setTimeout(r, 1_100));
    const res = await call(api.url, '/api/v1/usage', { key });
    return res.body.dataRemainingMb;
  }
  /** The worker's email sender runs every 5 s: wait for two of its runs after the fold. */
  const twoSenderRuns = () => new Promise((r) => setTimeout(r, 11_000));
  /** The email's figure (GB, the one rounding rule of common/src/billing/remaining.ts) in MB. */
  const stated = (text: string | undefined) =>
    Number(/: ([\d.]+) GB of 0\.02 GB left/.exec(text ?? '')?.[1]) * 1000;

  it('at 20 % of 20 MB: nothing after 10 and 14 MB used, "low" with the API\'s figure after 17 MB', async () => {
    const account = await customer(20);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
    expect(await download(pods[0]!.port, origin.port, auth, 10 * MB)).toBe(200);
    await settled(account.id, 10 * MB);
    await twoSenderRuns();
    expect(mails(account.email)).toEqual([]);
    expect(await download(pods[0]!.port, origin.port, auth, 4 * MB)).toBe(200);
    await settled(account.id, 14 * MB);
    await twoSenderRuns();
    expect(mails(account.email)).toEqual([]);
    expect(await download(pods[0]!.port, origin.port, auth, 3 * MB)).toBe(200);
    await settled(account.id, 17 * MB);
    await until(() => mails(account.email).length > 0, 'the low-bandwidth email');
    const [mail] = mails(account.email);
    expect(mail!.subject).toMatch(/^Low basic bandwidth: [\d.]+ GB of 0\.02 GB left$/);
    expect(mail!.text).not.toContain('used up');
    const api = await apiRemainingMb(account.apiKey);
    expect(Math.abs(stated(mail!.text) - api)).toBeLessThanOrEqual(0.01);
    process.stdout.write(
      `alert at 20 % of 20 MB after 17 MB: email "${mail!.subject}", API ${api} MB left\n`,
    );
  }, 120_000);

  it('at 50 % of 20 MB: after 12 MB used the email states the 8 MB the API states', async () => {
    const account = await customer(50);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
    expect(await download(pods[0]!.port, origin.port, auth, 12 * MB)).toBe(200);
    await settled(account.id, 12 * MB);
    await until(() => mails(account.email).length > 0, 'the low-bandwidth email');
    const [mail] = mails(account.email);
    const api = await apiRemainingMb(account.apiKey);
    expect(api).toBeCloseTo(8, 1);
    expect(Math.abs(stated(mail!.text) - api)).toBeLessThanOrEqual(0.01);
    process.stdout.write(
      `alert at 50 % of 20 MB after 12 MB: email "${mail!.subject}", API ${api} MB left\n`,
    );
  }, 120_000);
});
