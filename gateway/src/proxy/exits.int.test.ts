import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { Server as ProxyChainServer } from 'proxy-chain';
import { accountWithBandwidth } from '#test/fixtures.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { gatewaySpec, startTestGateway, useTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, openTunnel, rawExchange } from '#test/gateway/client.ts';

// Exits on loopback source addresses (Linux routes all of 127/8 to lo), labelled as different
// locations; the origin answers with the peer address it sees, i.e. the exit that was used.
let upstream: ProxyChainServer;
let upstreamPort: number;
let upstreamRequests = 0;
let gateway: TestGateway;
let account: NewAccount;

// The gateway starts below, once the upstream proxy listens and the account exists.
const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  upstream = new ProxyChainServer({
    port: 0,
    host: '127.0.0.1',
    verbose: false,
    prepareRequestFunction: ({ username, password }) => {
      upstreamRequests++;
      return { requestAuthentication: username !== 'up' || password !== 'secret', localAddress: '127.0.0.9' };
    },
  });
  await upstream.listen();
  upstreamPort = upstream.port;
  account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  gateway = await fx.start(
    gatewaySpec('basic', [
      { name: 'us-1', sourceAddress: '127.0.0.2', country: 'us', state: 'newyork', city: 'newyorkcity' },
      { name: 'us-2', sourceAddress: '127.0.0.3', country: 'us', state: 'texas' },
      { name: 'us-3', sourceAddress: '127.0.0.4', country: 'us' },
      { name: 'de-1', sourceAddress: '127.0.0.5', country: 'de' },
      { name: 'fr-upstream', upstream: { url: `http://up:secret@127.0.0.1:${upstreamPort}` }, country: 'fr' },
      { name: 'fr-local', sourceAddress: '127.0.0.6', country: 'fr' },
    ]),
  );
});

afterAll(async () => {
  await upstream?.close(true);
});

const peer = async (password: string, user = account.proxyUsername) => {
  const { responses } = await rawExchange(gateway.port, [
    get(`http://127.0.0.1:${fx.origin.port}/peer`, basicAuth(user, password)),
  ]);
  if (responses[0]!.status !== 200)
    return `status ${responses[0]!.status} ${String(responses[0]!.headers['proxy-status'])}`;
  return responses[0]!.body.toString();
};

describe('exits', () => {
  it('targets by country, state and city and never broadens', async () => {
    const p = account.proxyPassword;
    expect(await peer(`${p}_country-de`)).toBe('127.0.0.5');
    expect(await peer(`${p}_country-us_state-texas`)).toBe('127.0.0.3');
    expect(await peer(`${p}_country-us_state-newyork-city-newyorkcity`)).toBe('127.0.0.2');
    expect(await peer(`${p}_country-us_state-ohio`)).toMatch(/^status 503 .*no exit matches/);
    expect(await peer(`${p}_country-jp`)).toMatch(/^status 503/);
  });

  it('rotates over every matching exit when there is no session, also per request on one keep-alive connection', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 9; i++) seen.add(await peer(`${account.proxyPassword}_country-us`));
    expect(seen).toEqual(new Set(['127.0.0.2', '127.0.0.3', '127.0.0.4']));
    const url = `http://127.0.0.1:${fx.origin.port}/peer`;
    const a = basicAuth(account.proxyUsername, `${account.proxyPassword}_country-us`);
    const { responses } = await rawExchange(gateway.port, [get(url, a), get(url, a), get(url, a)]);
    expect(new Set(responses.map((r) => r.body.toString())).size).toBe(3);
  });

  it('keeps a session on one exit, and different sessions spread', async () => {
    const exits = new Set<string>();
    for (let s = 0; s < 12; s++) {
      const first = await peer(`${account.proxyPassword}_country-us_session-s${s}_lifetime-5m`);
      for (let i = 0; i < 3; i++)
        expect(await peer(`${account.proxyPassword}_country-us_session-s${s}_lifetime-5m`)).toBe(first);
      exits.add(first);
    }
    expect(exits.size).toBeGreaterThan(1);
  });

  it('gives a session the same exit from another gateway pod', async () => {
    const other = await startTestGateway(
      fx.db.pool,
      fx.db.url,
      gatewaySpec('basic', [
        { name: 'us-1', sourceAddress: '127.0.0.2', country: 'us', state: 'newyork', city: 'newyorkcity' },
        { name: 'us-2', sourceAddress: '127.0.0.3', country: 'us', state: 'texas' },
        { name: 'us-3', sourceAddress: '127.0.0.4', country: 'us' },
      ]),
    );
    try {
      for (let s = 0; s < 6; s++) {
        const password = `${account.proxyPassword}_country-us_session-pod${s}`;
        const here = await peer(password);
        const { responses } = await rawExchange(other.port, [
          get(`http://127.0.0.1:${fx.origin.port}/peer`, basicAuth(account.proxyUsername, password)),
        ]);
        expect(responses[0]!.body.toString()).toBe(here);
      }
    } finally {
      await other.close();
    }
  });

  it('starts a new exit choice when the lifetime has run out', async () => {
    const password = `${account.proxyPassword}_country-us_session-expiring_lifetime-1m`;
    await peer(password);
    const { rows } = await fx.db.pool.query<{ started_at: Date }>('SELECT started_at FROM sticky_sessions');
    expect(rows.length).toBeGreaterThan(0);
    // The session's start is what every pod derives the exit from; a run-out session restarts.
    await fx.db.pool.query(
      `UPDATE sticky_sessions SET expires_at = now() - interval '1 second', started_at = now() - interval '2 minutes'`,
    );
    const fresh = await startTestGateway(
      fx.db.pool,
      fx.db.url,
      gatewaySpec('basic', [{ name: 'any', country: '*' }]),
    );
    try {
      await rawExchange(fresh.port, [
        get(`http://127.0.0.1:${fx.origin.port}/peer`, basicAuth(account.proxyUsername, password)),
      ]);
    } finally {
      await fresh.close();
    }
    const after = await fx.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM sticky_sessions WHERE expires_at > now()`,
    );
    expect(after.rows[0]!.n).toBe(1);
  });

  it('chains through an upstream proxy exit, for both request forms', async () => {
    const before = upstreamRequests;
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) seen.add(await peer(`${account.proxyPassword}_country-fr`));
    expect(seen).toEqual(new Set(['127.0.0.9', '127.0.0.6']));
    const t = await openTunnel(
      gateway.port,
      `127.0.0.1:${fx.origin.port}`,
      basicAuth(account.proxyUsername, `${account.proxyPassword}_country-fr_session-up1`),
    );
    expect(t.status).toBe(200);
    t.socket.destroy();
    expect(upstreamRequests).toBeGreaterThan(before);
  });

  it('answers a destination refusing with a 502 for that customer only: the shared exit is not marked failed', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as net.AddressInfo;
        s.close(() => resolve(port));
      });
    });
    const failures = async () =>
      (await gateway.registry.getSingleMetric('proxyfleet_gateway_exit_failures_total')!.get()).values.reduce(
        (n, v) => n + v.value,
        0,
      );
    const password = `${account.proxyPassword}_country-us_session-closed`;
    const exit = await peer(password);
    const before = await failures();
    const t = await openTunnel(
      gateway.port,
      `127.0.0.1:${closedPort}`,
      basicAuth(account.proxyUsername, password),
    );
    t.socket.destroy();
    expect(await failures()).toBe(before);
    expect(t.status).toBe(502);
    expect(t.headers).toContain('refused or closed the connection');
    const { responses } = await rawExchange(gateway.port, [
      get(`http://127.0.0.1:${closedPort}/`, basicAuth(account.proxyUsername, password)),
    ]);
    expect(responses[0]!.status).toBe(502);
    expect(String(responses[0]!.headers['proxy-status'])).toContain('refused or closed the connection');
    expect(await failures()).toBe(before);
    // The session and every other customer on that exit keep it.
    expect(await peer(password)).toBe(exit);
  });

  it('fails over to another matching exit when the upstream exit dies, keeping sessions working', async () => {
    // Find a session that the ranking puts on the upstream exit.
    let session = '';
    for (let s = 0; s < 40 && !session; s++) {
      if ((await peer(`${account.proxyPassword}_country-fr_session-f${s}`)) === '127.0.0.9')
        session = `f${s}`;
    }
    expect(session).not.toBe('');
    await upstream.close(true);
    expect(await peer(`${account.proxyPassword}_country-fr_session-${session}`)).toBe('127.0.0.6');
    for (let i = 0; i < 4; i++) expect(await peer(`${account.proxyPassword}_country-fr`)).toBe('127.0.0.6');
    const t = await openTunnel(
      gateway.port,
      `127.0.0.1:${fx.origin.port}`,
      basicAuth(account.proxyUsername, `${account.proxyPassword}_country-fr_session-${session}`),
    );
    expect(t.status).toBe(200);
    t.socket.destroy();
  });
});
