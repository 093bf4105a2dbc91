// A gateway process SIGKILLed while it holds a lease of most of a customer's balance (docs/adr/0025,
// finding 6): another gateway serves the customer again once the dead one's heartbeat is 30 s old
// (docs/adr/0025), not after the lease TTL (300 s), and the balance stays consistent.
import { describe, expect, it } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, openTunnel, rawExchange } from '#test/gateway/client.ts';

/** gateway_dead_after() */
const DEAD_AFTER_MS = 30_000;
/** Time to notice on top of it: a request every second, each admission re-asking within 2 s. */
const SLACK_MS = 10_000;
const BALANCE = 2_000_000;
/**
 * Two missed heartbeats (10 s) after the last one (up to 5 s before the kill), plus an admission's
 * waits for held leases (2 s) and a standing denial (2 s), and slack for a loaded machine.
 */
const STRANDED_AFTER_MS = 20_000;

// The test spawns the gateway processes.
const fx = useTestGateway({ gateway: false });

async function balance(accountId: string) {
  const { rows } = await fx.db.pool.query<{ free: number; leased_bytes: number; held: number }>(
    `SELECT b.total_bytes - b.used_bytes - b.leased_bytes AS free, b.leased_bytes,
            coalesce((SELECT sum(CASE WHEN l.released_at IS NULL THEN l.granted_bytes - l.charged_bytes
                                      ELSE greatest(0, least(l.spent_bytes, l.granted_bytes) - l.charged_bytes) END)
                        FROM bandwidth_leases l WHERE l.account_id = b.account_id AND l.product = b.product), 0)::bigint AS held
       FROM balances b WHERE b.account_id = $1 AND b.product = 'basic'`,
    [accountId],
  );
  return rows[0]!;
}

describe('a gateway that crashes holding a lease', () => {
  it('leaves its customer served by another gateway within 30 s of its last heartbeat', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: BALANCE });
    const one = await fx.spawn(gatewaySpec('basic'), { PROXYFLEET_GATEWAY_ID: 'crash-1' });
    const two = await fx.spawn(gatewaySpec('basic'), { PROXYFLEET_GATEWAY_ID: 'crash-2' });
    await cacheSynced(fx.db.pool, 2);
    const auth = basicAuth(account.proxyUsername, account.proxyPassword);
    const url = `http://127.0.0.1:${fx.origin.port}/bytes/1000`;

    // The customer works through gateway 1 on an open tunnel: with a connection open and its
    // leases below the size it wants, gateway 1 keeps drawing until it holds all that is free.
    const tunnel = await openTunnel(one.port, `127.0.0.1:${fx.origin.port}`, auth);
    expect(tunnel.status).toBe(200);
    tunnel.socket.on('data', () => undefined);
    tunnel.socket.write('GET /bytes/1000 HTTP/1.1\r\nHost: x\r\n\r\n');
    const drawnBy = Date.now() + 15_000;
    while ((await balance(account.id)).free > 0 && Date.now() < drawnBy)
      await new Promise((r) => setTimeout(r, 100));
    const drawn = await balance(account.id);
    expect(drawn.free).toBe(0);
    expect(drawn.leased_bytes).toBeGreaterThan(BALANCE * 0.9);
    // Gateway 2 has nothing to give while gateway 1 lives (it waits 2 s for leases to come back).
    expect((await rawExchange(two.port, [get(url, auth)])).responses[0]!.status).toBe(402);

    expect(await one.stop('SIGKILL')).toBe(null);
    const killedAt = Date.now();
    let status = 0;
    // Meanwhile: 402 only until the dead gateway has missed two heartbeats (10 s after its last,
    // at most 15 s after the kill, plus an admission's waits), then 503 bandwidth_held, never
    // "buy bandwidth" for what is only stranded (migrations/0081).
    const latePaymentRequired: number[] = [];
    const held: string[] = [];
    while (Date.now() - killedAt < DEAD_AFTER_MS + SLACK_MS) {
      const answer = (await rawExchange(two.port, [get(url, auth)])).responses[0]!;
      status = answer.status;
      if (status === 200) break;
      const since = Date.now() - killedAt;
      if (status === 402 && since > STRANDED_AFTER_MS) latePaymentRequired.push(since);
      if (status === 503)
        held.push(`${String(answer.headers['proxy-status'])} retry-after ${answer.headers['retry-after']}`);
      await new Promise((r) => setTimeout(r, 1_000));
    }
    const waitedMs = Date.now() - killedAt;
    process.stdout.write(
      `crash test: status ${status} on gateway 2, ${waitedMs} ms after the SIGKILL; ${held.length} answers 503 before\n`,
    );
    expect(status).toBe(200);
    expect(latePaymentRequired).toEqual([]);
    expect(held.length).toBeGreaterThan(0);
    for (const h of held) expect(h).toMatch(/held by a gateway that stopped.*retry-after 10$/);

    // What the leases hold is what the balance says they hold; gateway 1's leases are all closed.
    const after = await balance(account.id);
    expect(after.leased_bytes).toBe(after.held);
    const open = await fx.db.pool.query<{ gateway_id: string }>(
      `SELECT DISTINCT gateway_id FROM bandwidth_leases WHERE account_id = $1 AND released_at IS NULL`,
      [account.id],
    );
    expect(open.rows).toEqual([{ gateway_id: 'crash-2' }]);
  }, 120_000);
});
