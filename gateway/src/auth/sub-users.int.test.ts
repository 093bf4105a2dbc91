// Sub-users end to end (docs/adr/0037): rows written straight into sub_users and
// sub_user_products reach a real gateway through the change feed; the sub-user's own credentials
// (in the plan's grammar, targeting included) are served on the account's balance, under the
// sub-user's limit, connection cap and status; its bytes are the account's bytes and its own.
import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import type net from 'node:net';
import { setAccountStatus } from '#common/accounts/accounts.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { overspendBound } from '../accounting/policy.ts';
import { cacheSynced, gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, download, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { counterDelta, counterValues, fold, usageAfterClose } from '#test/gateway/usage.ts';

const fx = useTestGateway({
  spec: gatewaySpec('basic', [
    { name: 'us-1', sourceAddress: '127.0.0.2', country: 'us' },
    { name: 'de-1', sourceAddress: '127.0.0.5', country: 'de' },
  ]),
});

interface SubUser {
  id: string;
  username: string;
  password: string;
}

/** A sub-user of `accountId`, inserted as the API would store it (password_enc is not read here). */
async function subUser(
  accountId: string,
  opts: { limit?: number; maxConnections?: number; bytesPerSecond?: number } = {},
): Promise<SubUser> {
  const username = `su${randomBytes(6).toString('hex')}`;
  const password = randomBytes(10).toString('hex');
  const { rows } = await fx.db.pool.query<{ id: string }>(
    `INSERT INTO sub_users (account_id, name, username, password_enc, password_sha256, max_connections, bytes_per_second)
     VALUES ($1, $2, $3, '\\x00'::bytea, sha256(convert_to($4, 'UTF8')), $5, $6) RETURNING id`,
    [accountId, username, username, password, opts.maxConnections ?? null, opts.bytesPerSecond ?? null],
  );
  const id = rows[0]!.id;
  if (opts.limit !== undefined)
    await fx.db.pool.query(
      `INSERT INTO sub_user_products (sub_user_id, account_id, product, limit_bytes) VALUES ($1, $2, 'basic', $3)`,
      [id, accountId, opts.limit],
    );
  await cacheSynced(fx.db.pool, [fx.gateway]);
  return { id, username, password };
}

async function request(auth: string, path = '/peer') {
  const { responses } = await rawExchange(fx.gateway.port, [
    get(`http://127.0.0.1:${fx.origin.port}${path}`, auth),
  ]);
  return responses[0]!;
}

async function used(accountId: string, subUserId: string) {
  await fold(fx.db.pool);
  const { rows } = await fx.db.pool.query<{ account: string; sub: string | null; hourly: string | null }>(
    `SELECT (SELECT used_bytes FROM balances WHERE account_id = $1 AND product = 'basic') AS account,
            (SELECT used_bytes FROM sub_user_products WHERE sub_user_id = $2 AND product = 'basic') AS sub,
            (SELECT sum(bytes_up + bytes_down) FROM sub_user_usage_hourly WHERE sub_user_id = $2) AS hourly`,
    [accountId, subUserId],
  );
  const r = rows[0]!;
  return { account: Number(r.account), sub: Number(r.sub ?? 0), hourly: Number(r.hourly ?? 0) };
}

/** Resolves true when the socket closes within `ms`. */
const closesWithin = (socket: net.Socket, ms: number) =>
  new Promise<boolean>((resolve) => {
    if (socket.destroyed) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });

/**
 * How long a cut or an answer through a tunnel may take before the test calls it missing: the
 * latency is not what these tests assert (a busy machine takes longer), only that it happens.
 */
const PATIENCE_MS = 10_000;

/** A request through an open CONNECT tunnel to the origin: the tunnel still carries traffic. */
/** An account and a sub-user of it, each with a tunnel to the origin open (not yet checked). */
async function subUserAndOwnTunnels() {
  const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  const sub = await subUser(account.id);
  const authority = `127.0.0.1:${fx.origin.port}`;
  const mine = await openTunnel(fx.gateway.port, authority, basicAuth(sub.username, sub.password));
  const own = await openTunnel(
    fx.gateway.port,
    authority,
    basicAuth(account.proxyUsername, account.proxyPassword),
  );
  return { account, sub, mine, own };
}

async function tunnelWorks(socket: net.Socket): Promise<boolean> {
  if (socket.destroyed) return false;
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), PATIENCE_MS);
    socket.once('data', (d: Buffer) => {
      clearTimeout(timer);
      resolve(d.toString('latin1').startsWith('HTTP/1.1 200'));
    });
    socket.write(`GET /peer HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  });
}

describe('sub-users', () => {
  it('authenticate with their own credentials and targeting; a wrong password is 407', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const sub = await subUser(account.id);
    const de = await request(basicAuth(sub.username, `${sub.password}_country-de`));
    expect([de.status, de.body.toString()]).toEqual([200, '127.0.0.5']);
    const us = await request(basicAuth(sub.username, `${sub.password}_country-us`));
    expect([us.status, us.body.toString()]).toEqual([200, '127.0.0.2']);
    expect((await request(basicAuth(sub.username, 'wrong'))).status).toBe(407);
    // The sub-user's password is not the account's, nor the other way round.
    expect((await request(basicAuth(sub.username, account.proxyPassword))).status).toBe(407);
    expect((await request(basicAuth(account.proxyUsername, sub.password))).status).toBe(407);
  });

  it("bills the sub-user's bytes to the account and to the sub-user, exactly", async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const sub = await subUser(account.id);
    const auth = basicAuth(sub.username, sub.password);
    expect(await download(fx.gateway.port, fx.origin.port, auth, 300_000)).toBe(200);
    expect(await download(fx.gateway.port, fx.origin.port, auth, 200_000)).toBe(200);
    const billed = await usageAfterClose(fx.gateway, fx.db.pool, account.id, 1);
    const total = Number(billed.up) + Number(billed.down);
    expect(total).toBeGreaterThan(500_000);
    const u = await used(account.id, sub.id);
    expect(u).toEqual({ account: total, sub: total, hourly: total });
    // The account's own traffic is the account's only.
    expect(
      await download(
        fx.gateway.port,
        fx.origin.port,
        basicAuth(account.proxyUsername, account.proxyPassword),
        100_000,
      ),
    ).toBe(200);
    const after = await usageAfterClose(fx.gateway, fx.db.pool, account.id, Number(billed.up) + 1);
    const u2 = await used(account.id, sub.id);
    expect(u2.account).toBe(Number(after.up) + Number(after.down));
    expect(u2.account).toBeGreaterThan(total + 100_000);
    expect([u2.sub, u2.hourly]).toEqual([total, total]);
    // Target statistics: the sub-user's requests under its id, the account's own under ''.
    await fx.gateway.targets.drain();
    const { rows } = await fx.db.pool.query<{ sub_user: string; requests: string }>(
      `SELECT sub_user, requests FROM target_usage WHERE account_id = $1 ORDER BY sub_user`,
      [account.id],
    );
    expect(rows.map((r) => [r.sub_user, Number(r.requests)])).toEqual([
      ['', 1],
      [sub.id, 2],
    ]);
  });

  it('bills each request of a keep-alive connection to whoever sent it, every byte once', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const sub = await subUser(account.id);
    const url = `http://127.0.0.1:${fx.origin.port}/peer`;
    const own = basicAuth(account.proxyUsername, account.proxyPassword);
    const mine = basicAuth(sub.username, sub.password);
    // Account, sub-user, account on one connection: the switches must not drop a request's head.
    const { responses, written, read } = await rawExchange(fx.gateway.port, [
      get(url, own),
      get(url, mine),
      get(url, own),
    ]);
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    const billed = await usageAfterClose(fx.gateway, fx.db.pool, account.id, written);
    expect([Number(billed.up), Number(billed.down), Number(billed.requests)]).toEqual([written, read, 3]);
    // The sub-user's line is its request alone: its head up, its response down.
    const { responses: alone, written: w1, read: r1 } = await rawExchange(fx.gateway.port, [get(url, mine)]);
    expect(alone[0]!.status).toBe(200);
    await usageAfterClose(fx.gateway, fx.db.pool, account.id, written + w1);
    const u = await used(account.id, sub.id);
    expect(u.sub).toBe(2 * (w1 + r1));
  });

  it("refuses the sub-user with 402 sub_user_limit once its limit is spent; the account's credentials still work", async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const limit = 1_000_000;
    const sub = await subUser(account.id, { limit });
    const auth = basicAuth(sub.username, sub.password);
    const statuses: number[] = [];
    for (let i = 0; i < 30 && statuses.at(-1) !== 402; i++)
      statuses.push(await download(fx.gateway.port, fx.origin.port, auth, 200_000));
    expect(statuses.at(-1)).toBe(402);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(3);
    const refused = await request(auth);
    expect(refused.status).toBe(402);
    expect(String(refused.headers['proxy-status'])).toContain("sub-user's traffic limit");
    expect(await counterValues(fx.gateway, 'proxyfleet_gateway_refusals_total')).toMatchObject({
      'sub_user_limit 4xx': expect.any(Number),
    });
    const own = await request(basicAuth(account.proxyUsername, account.proxyPassword));
    expect(own.status).toBe(200);
    await usageAfterClose(fx.gateway, fx.db.pool, account.id, 1);
    await fx.gateway.ledger.flushSettled();
    const u = await used(account.id, sub.id);
    expect(u.sub).toBeGreaterThan(limit - 200_000);
    expect(u.sub).toBeLessThanOrEqual(limit + overspendBound(1, 1));
    expect(u.hourly).toBe(u.sub);
    // Raising the limit is announced as a balance change: the denial is forgotten at once.
    await fx.db.pool.query(`UPDATE sub_user_products SET limit_bytes = $2 WHERE sub_user_id = $1`, [
      sub.id,
      limit + 2_000_000,
    ]);
    await cacheSynced(fx.db.pool, [fx.gateway]);
    expect((await request(auth)).status).toBe(200);
  });

  it.each([
    [
      'suspended',
      (id: string) => fx.db.pool.query(`UPDATE sub_users SET status = 'suspended' WHERE id = $1`, [id]),
    ],
    ['deleted', (id: string) => fx.db.pool.query(`DELETE FROM sub_users WHERE id = $1`, [id])],
    [
      'renamed',
      (id: string) => fx.db.pool.query(`UPDATE sub_users SET username = 'x' || username WHERE id = $1`, [id]),
    ],
    [
      'given a new password',
      (id: string) =>
        fx.db.pool.query(`UPDATE sub_users SET password_sha256 = sha256('other'::bytea) WHERE id = $1`, [id]),
    ],
  ])("cuts the live tunnel of a sub-user %s; the account's own survives", async (what, change) => {
    const { sub, mine, own } = await subUserAndOwnTunnels();
    expect([mine.status, own.status]).toEqual([200, 200]);
    expect(await tunnelWorks(mine.socket)).toBe(true);
    const cuts = async () =>
      (await counterValues(fx.gateway, 'proxyfleet_gateway_revocation_cuts_total'))[''] ?? 0;
    const before = await cuts();
    await change(sub.id);
    expect(await closesWithin(mine.socket, PATIENCE_MS)).toBe(true);
    expect(await tunnelWorks(own.socket)).toBe(true);
    own.socket.destroy();
    const status = (await request(basicAuth(sub.username, sub.password))).status;
    expect(status).toBe(what === 'suspended' ? 403 : 407);
    expect((await cuts()) - before).toBe(1);
  });

  it("keeps its live tunnel when only the account's own password changes", async () => {
    const { account, sub, mine, own } = await subUserAndOwnTunnels();
    expect([mine.status, own.status]).toEqual([200, 200]);
    await fx.db.pool.query(
      `UPDATE proxy_credentials SET password_sha256 = sha256('other'::bytea) WHERE account_id = $1`,
      [account.id],
    );
    // The account's own tunnel was admitted with the old password: cut. The sub-user's was not.
    expect(await closesWithin(own.socket, PATIENCE_MS)).toBe(true);
    expect(await tunnelWorks(mine.socket)).toBe(true);
    mine.socket.destroy();
    expect((await request(basicAuth(sub.username, sub.password))).status).toBe(200);
  });

  it("is cut and refused with its account's suspension", async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const sub = await subUser(account.id);
    const auth = basicAuth(sub.username, sub.password);
    const t = await openTunnel(fx.gateway.port, `127.0.0.1:${fx.origin.port}`, auth);
    expect(t.status).toBe(200);
    await setAccountStatus(fx.db.pool, account.id, 'suspended');
    expect(await closesWithin(t.socket, PATIENCE_MS)).toBe(true);
    expect((await request(auth)).status).toBe(403);
  });

  it("is throttled to its own cap; the account's own traffic is not", async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const sub = await subUser(account.id, { bytesPerSecond: 256 * 1024 });
    const timed = async (auth: string) => {
      const started = performance.now();
      expect(await download(fx.gateway.port, fx.origin.port, auth, 768 * 1024)).toBe(200);
      return performance.now() - started;
    };
    const holds = () => counterValues(fx.gateway, 'proxyfleet_gateway_throttle_holds_total');
    const before = await holds();
    // 768 KiB at 256 KiB/s after a 256 KiB burst: about 2 s.
    const slow = await timed(basicAuth(sub.username, sub.password));
    expect(slow).toBeGreaterThan(1_700);
    const afterSub = await holds();
    expect(Object.keys(counterDelta(afterSub, before))).toEqual(['sub_user']);
    // The account's own download is never held (counted, not timed: a busy machine is slow anyway).
    await timed(basicAuth(account.proxyUsername, account.proxyPassword));
    expect(counterDelta(await holds(), afterSub)).toEqual({});
  });

  it("counts a sub-user's traffic against the account's cap: the two together get the cap", async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await fx.db.pool.query(
      `INSERT INTO account_throttles (account_id, product, bytes_per_second) VALUES ($1, 'basic', $2)`,
      [account.id, 256 * 1024],
    );
    const sub = await subUser(account.id);
    const started = performance.now();
    // 2 x 512 KiB at 256 KiB/s after a 256 KiB burst: about 3 s, whoever sends it.
    const statuses = await Promise.all([
      download(fx.gateway.port, fx.origin.port, basicAuth(sub.username, sub.password), 512 * 1024),
      download(
        fx.gateway.port,
        fx.origin.port,
        basicAuth(account.proxyUsername, account.proxyPassword),
        512 * 1024,
      ),
    ]);
    expect(statuses).toEqual([200, 200]);
    expect(performance.now() - started).toBeGreaterThan(2_500);
  });

  it('refuses a connection past max_connections with 429', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const sub = await subUser(account.id, { maxConnections: 1 });
    const authority = `127.0.0.1:${fx.origin.port}`;
    const auth = basicAuth(sub.username, sub.password);
    const first = await openTunnel(fx.gateway.port, authority, auth);
    const second = await openTunnel(fx.gateway.port, authority, auth);
    expect([first.status, second.status]).toEqual([200, 429]);
    // The account's own connections are not the sub-user's.
    const own = await openTunnel(
      fx.gateway.port,
      authority,
      basicAuth(account.proxyUsername, account.proxyPassword),
    );
    expect(own.status).toBe(200);
    for (const t of [first, second, own]) t.socket.destroy();
  });
});
