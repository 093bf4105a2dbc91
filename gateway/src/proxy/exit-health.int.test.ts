// Exits whose source address leaves the node (docs/adr/0117), with real sockets: exits on loopback
// addresses, which the kernel binds whatever is listed (127/8 is routed to lo), so the interfaces
// the gateway reads are the test's own list, edited to take an address away and bring it back.
// The origin answers /peer with the address it was reached from: the exit that was used.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type os from 'node:os';
import { createLogger } from '#common/logger.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { gatewaySpec, useTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { until } from '#test/process.ts';
import { GatewayHeartbeat } from '../accounting/heartbeat.ts';
import { ADDRESS_CHECK_MS } from './exit-addresses.ts';

const fx = useTestGateway({ gateway: false });
let gateway: TestGateway;
let account: NewAccount;
let listed = new Set(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
const interfaces = (): NodeJS.Dict<os.NetworkInterfaceInfo[]> => ({
  test: [...listed].map((address) => ({
    address,
    netmask: '255.255.255.255',
    family: 'IPv4',
    mac: '00:00:00:00:00:00',
    internal: false,
    cidr: `${address}/32`,
  })),
});

beforeAll(async () => {
  account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  // The default check period: what is measured below is what a pod does.
  gateway = await fx.start(
    gatewaySpec('basic', [
      { name: 'us-1', sourceAddress: '127.0.0.2', country: 'us' },
      { name: 'us-2', sourceAddress: '127.0.0.3', country: 'us' },
      { name: 'de-1', sourceAddress: '127.0.0.4', country: 'de' },
    ]),
    { interfaces, gatewayId: 'exit-health-gw' },
  );
});

const peer = async (password: string) => {
  const { responses } = await rawExchange(gateway.port, [
    get(`http://127.0.0.1:${fx.origin.port}/peer`, basicAuth(account.proxyUsername, password)),
  ]);
  const r = responses[0]!;
  return r.status === 200 ? r.body.toString() : `${r.status} ${String(r.headers['proxy-status'])}`;
};
const state = (exit: string) => gateway.exitReport().find((r) => r.n === exit)!.s;
const missingGauge = async (exit: string) =>
  (await gateway.registry.getSingleMetric('proxyfleet_gateway_exit_missing')!.get()).values.find(
    (v) => v.labels.exit === exit,
  )?.value;

/** Takes `address` off the list and waits for the gateway to see it: the milliseconds it took. */
async function take(address: string, exit: string): Promise<number> {
  listed.delete(address);
  const from = performance.now();
  await until(() => state(exit) === 'missing', `${exit} missing`, 4 * ADDRESS_CHECK_MS);
  return performance.now() - from;
}

async function bringBack(address: string, exit: string): Promise<number> {
  listed.add(address);
  const from = performance.now();
  await until(() => state(exit) !== 'missing', `${exit} back`, 4 * ADDRESS_CHECK_MS);
  return performance.now() - from;
}

afterAll(() => {
  listed = new Set();
});

describe('an exit whose source address leaves the node', () => {
  const p = () => account.proxyPassword;

  it('is skipped while missing, sessions on it move to the same next exit and come back, and it is used again', async () => {
    const rotating = async () => {
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) seen.add(await peer(`${p()}_country-us`));
      return seen;
    };
    expect(await rotating()).toEqual(new Set(['127.0.0.2', '127.0.0.3']));
    // A session the ranking puts on us-2 (127.0.0.3).
    let session = '';
    for (let s = 0; s < 40 && !session; s++)
      if ((await peer(`${p()}_country-us_session-m${s}`)) === '127.0.0.3')
        session = `${p()}_country-us_session-m${s}`;
    expect(session).not.toBe('');
    expect(gateway.exitReport().find((r) => r.n === 'us-2')).toEqual(
      expect.objectContaining({ s: 'ok', ls: expect.any(Number) }),
    );

    const removed = await take('127.0.0.3', 'us-2');
    expect(await missingGauge('us-2')).toBe(1);
    expect(await rotating()).toEqual(new Set(['127.0.0.2']));
    expect(await peer(session)).toBe('127.0.0.2');
    // A tunnel too: CONNECT goes through the remaining exit.
    const t = await openTunnel(
      gateway.port,
      `127.0.0.1:${fx.origin.port}`,
      basicAuth(account.proxyUsername, `${p()}_country-us`),
    );
    expect(t.status).toBe(200);
    t.socket.destroy();

    const restored = await bringBack('127.0.0.3', 'us-2');
    expect(await missingGauge('us-2')).toBe(0);
    expect(await rotating()).toEqual(new Set(['127.0.0.2', '127.0.0.3']));
    expect(await peer(session)).toBe('127.0.0.3');
    process.stdout.write(
      `exit address check every ${ADDRESS_CHECK_MS} ms: missing after ${Math.round(removed)} ms, back after ${Math.round(restored)} ms\n`,
    );
  }, 60_000);

  it('a location whose every exit is missing gets 503 no_exit, for both request forms, until it is back', async () => {
    await take('127.0.0.4', 'de-1');
    expect(await peer(`${p()}_country-de`)).toMatch(/^503 .*proxy_configuration_error.*no exit matches/);
    const t = await openTunnel(
      gateway.port,
      `127.0.0.1:${fx.origin.port}`,
      basicAuth(account.proxyUsername, `${p()}_country-de`),
    );
    expect(t.status).toBe(503);
    expect(t.headers).toContain('no exit matches the requested location');
    t.socket.destroy();
    // Nothing was dialled through it: not counted as an exit failure.
    expect(gateway.exitReport().find((r) => r.n === 'de-1')).toEqual({ n: 'de-1', s: 'missing' });
    await bringBack('127.0.0.4', 'de-1');
    expect(await peer(`${p()}_country-de`)).toBe('127.0.0.4');
  }, 60_000);

  it('the heartbeat carries every exit in the same write', async () => {
    const logger = createLogger('test', 'silent');
    const hb = await GatewayHeartbeat.start({
      pool: fx.db.pool,
      gatewayId: 'exit-health-gw',
      plan: 'basic',
      logger,
    });
    try {
      hb.reportExits(() => gateway.exitReport());
      await take('127.0.0.3', 'us-2');
      await hb.beat();
      const { rows } = await fx.db.pool.query<{ exits: unknown }>(
        `SELECT exits FROM gateway_heartbeats WHERE gateway_id = 'exit-health-gw'`,
      );
      expect(rows[0]!.exits).toEqual([
        expect.objectContaining({ n: 'us-1', s: 'ok', ls: expect.any(Number) }),
        expect.objectContaining({ n: 'us-2', s: 'missing' }),
        expect.objectContaining({ n: 'de-1', s: 'ok' }),
      ]);
      await bringBack('127.0.0.3', 'us-2');
    } finally {
      await hb.stop();
    }
  }, 60_000);
});
