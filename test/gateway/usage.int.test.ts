// How the tests read what a gateway billed (usage.ts). flush() hands back a flush already in
// flight, the timer's, whose batch may have been built before the last bytes settled: a reading
// through it alone misses them, and the next reading counts them as its own. So a loaded machine
// once saw a TLS connection cut mid-transfer billed 5.9 MB against 4.0 MB read: its baseline,
// read as an earlier 16 MB download closed, lacked that download's last 1.9 MB
// (gateway/src/tls/tls.int.test.ts, 'a TLS connection cut mid-transfer').
import { beforeAll, expect, it } from '@jest/globals';
import type { Pool } from '#common/db/pool.ts';
import { createInterceptedPool } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { until } from '#test/process.ts';
import { gatewaySpec, useTestGateway } from './fixture.ts';
import { basicAuth, openTunnel } from './client.ts';
import { flushedUsage } from './usage.ts';

let pool: Pool;
/** While set, the next usage write waits for it: a flush held in flight. */
let gate: Promise<void> | undefined;

// The test starts its gateway on this pool.
const fx = useTestGateway({ gateway: false });

beforeAll(() => {
  pool = createInterceptedPool(fx.db.url, 'usage-reading-test', (sql) => {
    if (!sql.includes('usage_record') || !gate) return undefined;
    const wait = gate;
    gate = undefined;
    return wait;
  });
  fx.onClose(() => pool.end());
});

it('flushedUsage reads every byte settled before it, past a flush in flight built before them', async () => {
  const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  const gateway = await fx.start(gatewaySpec('basic'), { pool });
  const tunnel = await openTunnel(
    gateway.port,
    `127.0.0.1:${fx.origin.port}`,
    basicAuth(account.proxyUsername, account.proxyPassword),
  );
  expect(tunnel.status).toBe(200);
  // A flush builds its batch now (the CONNECT and its 200) and then waits on the database; any
  // other flush() meanwhile, the timer's included, hands back this one.
  let release!: () => void;
  gate = new Promise<void>((r) => (release = r));
  const inFlight = gateway.ledger.flush();
  // 60 KB through the tunnel, settled at its close: after that batch was built.
  const closed = new Promise<void>((r) => tunnel.socket.on('close', () => r()));
  tunnel.socket.on('data', () => undefined);
  tunnel.socket.write(`GET /bytes/60000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  await closed;
  await until(() => gateway.ledger.activeConnections === 0, 'the gateway to close the tunnel', 10_000);
  const reading = flushedUsage(gateway, fx.db.pool, account.id);
  release();
  await inFlight;
  const usage = await reading;
  expect({ up: Number(usage.up), down: Number(usage.down) }).toEqual({
    up: tunnel.socket.bytesWritten,
    down: tunnel.socket.bytesRead,
  });
});
