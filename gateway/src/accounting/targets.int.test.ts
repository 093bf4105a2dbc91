// Target statistics through a real gateway and PostgreSQL (docs/adr/0026): two host names under
// one registrable domain, over plain requests and a CONNECT tunnel, count as one domain with
// exactly the bytes billed; no path or query is stored; the caps fold into '(other)'; an account
// that opted out gets no rows.
import { describe, expect, it } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { cacheSynced, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { recordedUsage } from '#test/gateway/usage.ts';
import { until } from '#test/process.ts';

const fx = useTestGateway({ targets: { perAccount: 2, perDay: 3 } });

/** A new account with bandwidth, once the gateway's credential cache knows it (else 407). */
async function newAccount(): Promise<NewAccount> {
  const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  await cacheSynced(fx.db.pool, [fx.gateway]);
  return account;
}

const auth = (a: NewAccount) => basicAuth(a.proxyUsername, `${a.proxyPassword}_country-us`);

/** Waits until the gateway closed every customer connection, then writes usage and statistics. */
async function flushed(): Promise<void> {
  // Up to 10 s: closing is the gateway's to see, which a busy machine can put off past 2 s.
  await until(
    () => fx.gateway.ledger.activeConnections === 0,
    'the gateway to close every connection',
    10_000,
  ).catch(() => undefined);
  expect(fx.gateway.ledger.activeConnections).toBe(0);
  // Not a timer's flush already in flight, built before the last bytes settled.
  await fx.gateway.ledger.flushSettled();
  await fx.gateway.targets.drain();
}

async function rows(accountId: string) {
  const { rows } = await fx.db.pool.query<{
    product: string;
    day: string;
    domain: string;
    bytes: number;
    requests: number;
  }>(
    `SELECT product, to_char(day, 'YYYY-MM-DD') AS day, domain, bytes, requests
       FROM target_usage WHERE account_id = $1 ORDER BY domain`,
    [accountId],
  );
  return rows;
}

/** A tunnel to `authority` that carries one GET of `path`; resolves once the answer is read. */
async function tunnelGet(a: NewAccount, authority: string, path: string): Promise<void> {
  const t = await openTunnel(fx.gateway.port, authority, auth(a));
  expect(t.status).toBe(200);
  let got = t.leftover.length;
  t.socket.write(`GET ${path} HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`);
  await new Promise<void>((resolve) => {
    t.socket.on('data', (c: Buffer) => (got += c.length));
    t.socket.once('close', () => resolve());
  });
  expect(got).toBeGreaterThan(1000);
}

describe('target statistics', () => {
  it('counts two hosts of one registrable domain, plain and tunnelled, as one domain with exactly the billed bytes and no path or query', async () => {
    const account = await newAccount();
    const base = (host: string) => `http://${host}.example.localhost:${fx.origin.port}`;
    const plain = await rawExchange(fx.gateway.port, [
      get(`${base('a')}/bytes/3000?secret=token-1`, auth(account)),
      get(`${base('b')}/bytes/5000?secret=token-2`, auth(account)),
    ]);
    expect(plain.responses.map((r) => r.status)).toEqual([200, 200]);
    await tunnelGet(account, `b.example.localhost:${fx.origin.port}`, '/bytes/7000?secret=token-3');
    await flushed();

    const billed = await recordedUsage(fx.db.pool, account.id);
    const today = new Date().toISOString().slice(0, 10);
    expect(await rows(account.id)).toEqual([
      {
        product: 'basic',
        day: today,
        domain: 'example.localhost',
        bytes: billed.up + billed.down,
        requests: 3,
      },
    ]);
    expect(billed.requests).toBe(3);
    const dump = JSON.stringify((await fx.db.pool.query('SELECT * FROM target_usage')).rows);
    expect(dump).not.toMatch(/secret|token|bytes\/|a\.example|b\.example/);
  });

  it('folds the domains past the gateway cap and past the per-day cap into (other), keeping the totals', async () => {
    const account = await newAccount();
    const to = (n: number) => get(`http://d${n}.localhost:${fx.origin.port}/bytes/100`, auth(account));
    const first = await rawExchange(fx.gateway.port, [1, 2, 3, 4, 5].map(to));
    await flushed();
    const second = await rawExchange(fx.gateway.port, [6, 7].map(to));
    expect([...first.responses, ...second.responses].map((r) => r.status)).toEqual(Array(7).fill(200));
    await flushed();

    const stored = await rows(account.id);
    const named = stored.filter((r) => r.domain !== '(other)');
    const other = stored.find((r) => r.domain === '(other)');
    // perDay 3: never more than three named domains a day, whatever the gateways sent.
    expect(named).toHaveLength(3);
    expect(other?.requests).toBe(4);
    const billed = await recordedUsage(fx.db.pool, account.id);
    expect(stored.reduce((sum, r) => sum + r.bytes, 0)).toBe(billed.up + billed.down);
    expect(stored.reduce((sum, r) => sum + r.requests, 0)).toBe(7);
  });

  it('records nothing for an account that opted out, while billing it as before', async () => {
    const account = await newAccount();
    await fx.db.pool.query('UPDATE accounts SET target_stats = false WHERE id = $1', [account.id]);
    await rawExchange(fx.gateway.port, [
      get(`http://a.example.localhost:${fx.origin.port}/bytes/100`, auth(account)),
    ]);
    await tunnelGet(account, `b.example.localhost:${fx.origin.port}`, '/bytes/2000');
    await flushed();
    expect(await rows(account.id)).toEqual([]);
    expect((await recordedUsage(fx.db.pool, account.id)).requests).toBe(2);
  });
});
