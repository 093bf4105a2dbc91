import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import tls from 'node:tls';
import { knownCustomer, tunnelToOrigin } from '#test/customers.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { createTestCa, type TestCa } from '#test/tls.ts';
import { overspendBound } from '../accounting/policy.ts';
import { FAILURES_ALLOWED } from '../auth/backoff.ts';
import { cacheSynced, gatewaySpec, startTestGateway, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { fold, recordedUsage } from '#test/gateway/usage.ts';

let tlsOrigin: https.Server;
let ca: TestCa;

// idleSeconds 60: a tunnel the tests keep open without traffic (the 429 tests' first ones, a TLS
// handshake) must not be closed as idle while a busy machine opens the next. The idle cut has
// its own gateway (idleSpec).
const fx = useTestGateway({ spec: idleSpec(60) });

beforeAll(async () => {
  // A certificate for an HTTPS origin (test/tls.ts): the bytes billed inside a tunnel are TLS records.
  ca = await createTestCa();
  const leaf = await ca.issue('origin', ['localhost']);
  tlsOrigin = https.createServer({ key: leaf.key, cert: leaf.cert }, (req, res) => {
    res.end(Buffer.alloc(Number(req.url?.slice(1) || 1000), 65));
  });
  await new Promise<void>((r) => tlsOrigin.listen(0, '127.0.0.1', r));
});

afterAll(async () => {
  tlsOrigin?.closeAllConnections();
  await new Promise((r) => tlsOrigin?.close(r));
  await ca?.remove();
});

function idleSpec(idleSeconds: number) {
  return gatewaySpec('basic', undefined, {
    limits: { maxConnectionsPerAccount: 2 },
    timeouts: { headersSeconds: 2, connectSeconds: 2, idleSeconds, maxLifetimeSeconds: 60 },
  });
}

const closed = (socket: Socket) =>
  new Promise<void>((r) => (socket.destroyed ? r() : socket.once('close', () => r())));

describe('protection', () => {
  it('bills TLS inside a tunnel byte for byte', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const t = await openTunnel(
      fx.gateway.port,
      `127.0.0.1:${(tlsOrigin.address() as AddressInfo).port}`,
      basicAuth(account.proxyUsername, account.proxyPassword),
    );
    expect(t.status).toBe(200);
    const secure = tls.connect({ socket: t.socket, rejectUnauthorized: false, servername: 'localhost' });
    secure.on('error', () => undefined);
    secure.write('GET /25000 HTTP/1.1\r\nHost: localhost\r\n\r\n');
    // Read the whole response, then drop the connection without a TLS close_notify, so every
    // byte the client sent was read by the gateway (an alert sent after the gateway closed is not).
    let received = Buffer.alloc(0);
    await new Promise<void>((r) =>
      secure.on('data', (c: Buffer) => {
        received = Buffer.concat([received, c]);
        const end = received.indexOf('\r\n\r\n');
        if (end >= 0 && received.length - end - 4 >= 25_000) r();
      }),
    );
    await new Promise((r) => setTimeout(r, 50));
    t.socket.destroy();
    await closed(t.socket);
    await fx.gateway.ledger.flushSettled();
    const usage = await recordedUsage(fx.db.pool, account.id);
    expect(usage.up).toBe(t.socket.bytesWritten);
    expect(usage.down).toBe(t.socket.bytesRead);
  });

  it('cuts a live tunnel when the budget is spent, within the bound', async () => {
    const budget = 1_000_000;
    const account = await knownCustomer(fx, budget);
    const t = await tunnelToOrigin(fx, account);
    expect(t.status).toBe(200);
    let read = 0;
    t.socket.on('data', (c: Buffer) => (read += c.length));
    t.socket.write('GET /bytes/50000000 HTTP/1.1\r\nHost: x\r\n\r\n');
    await closed(t.socket);
    expect(read).toBeLessThan(50_000_000);
    await fx.gateway.ledger.flushSettled();
    await fold(fx.db.pool);
    const { rows } = await fx.db.pool.query<{ used_bytes: number }>(
      `SELECT used_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [account.id],
    );
    expect(rows[0]!.used_bytes).toBeLessThanOrEqual(budget + overspendBound(1, 1));
    const again = await openTunnel(
      fx.gateway.port,
      `127.0.0.1:${fx.origin.port}`,
      basicAuth(account.proxyUsername, account.proxyPassword),
    );
    expect(again.status).toBe(402);
  });

  it('refuses a third concurrent connection of one account with 429', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
    const a = await openTunnel(fx.gateway.port, `127.0.0.1:${fx.origin.port}`, auth);
    const b = await openTunnel(fx.gateway.port, `127.0.0.1:${fx.origin.port}`, auth);
    const c = await openTunnel(fx.gateway.port, `127.0.0.1:${fx.origin.port}`, auth);
    expect([a.status, b.status, c.status]).toEqual([200, 200, 429]);
    expect(c.headers).toMatch(/proxy-status: proxyfleet; error=connection_limit_reached/i);
    for (const t of [a, b, c]) t.socket.destroy();
  });

  it('holds the connection cap for a burst that arrives while the first lease is pending', async () => {
    // A fresh account: its budget has no lease yet, so every tunnel of the burst waits for the
    // same grant; the cap must still count the ones attached meanwhile.
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
    const burst = await Promise.all(
      Array.from({ length: 10 }, () => openTunnel(fx.gateway.port, `127.0.0.1:${fx.origin.port}`, auth)),
    );
    const statuses = burst.map((t) => t.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(2);
    expect(statuses.filter((s) => s === 429)).toHaveLength(8);
    for (const t of burst) t.socket.destroy();
  });

  it('refuses a request whose Connection header names Content-Length (request smuggling)', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const smuggled = 'GET /bytes/7 HTTP/1.1\r\nHost: victim\r\n\r\n';
    const request =
      get(
        `http://127.0.0.1:${fx.origin.port}/peer`,
        basicAuth(account.proxyUsername, account.proxyPassword),
        `Connection: keep-alive, content-length\r\nContent-Length: ${smuggled.length}\r\n`,
      ) + smuggled;
    const r = await rawExchange(fx.gateway.port, [request]);
    expect(r.responses).toHaveLength(1);
    expect(r.responses[0]!.status).toBe(400);
    expect(r.responses[0]!.headers['proxy-status']).toMatch(/error=http_request_error/);
  });

  it('closes idle tunnels after idleSeconds', async () => {
    const idle = await startTestGateway(fx.db.pool, fx.db.url, idleSpec(1));
    try {
      const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
      await cacheSynced(fx.db.pool, [idle]);
      const t = await openTunnel(
        idle.port,
        `127.0.0.1:${fx.origin.port}`,
        basicAuth(account.proxyUsername, account.proxyPassword),
      );
      expect(t.status).toBe(200);
      const started = Date.now();
      await closed(t.socket);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    } finally {
      await idle.close();
    }
  });

  it('backs off an address after repeated failed authentication, even with right credentials', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const url = `http://127.0.0.1:${fx.origin.port}/peer`;
    for (let i = 0; i < FAILURES_ALLOWED; i++) {
      const r = await rawExchange(fx.gateway.port, [get(url, basicAuth(account.proxyUsername, 'wrong'))], {
        sourceAddress: '127.0.3.1',
      });
      expect(r.responses[0]!.status).toBe(407);
    }
    const blocked = await rawExchange(
      fx.gateway.port,
      [get(url, basicAuth(account.proxyUsername, account.proxyPassword))],
      { sourceAddress: '127.0.3.1' },
    );
    expect(blocked.responses[0]!.status).toBe(429);
    expect(Number(blocked.responses[0]!.headers['retry-after'])).toBeGreaterThan(0);
    const other = await rawExchange(
      fx.gateway.port,
      [get(url, basicAuth(account.proxyUsername, account.proxyPassword))],
      { sourceAddress: '127.0.3.2' },
    );
    expect(other.responses[0]!.status).toBe(200);
  });
});
