import { beforeAll, describe, expect, it } from '@jest/globals';
import type { Pool } from '#common/db/pool.ts';
import { createInterceptedPool } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { gatewaySpec, startTestGateway, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, openTunnel } from '#test/gateway/client.ts';
import { recordedUsage } from '#test/gateway/usage.ts';

let pool: Pool;
/** While set, the next usage write waits for it: a periodic flush held in flight. */
let gate: Promise<void> | undefined;

// Each test starts its gateway on this pool.
const fx = useTestGateway({ gateway: false });

beforeAll(() => {
  pool = createInterceptedPool(fx.db.url, 'final-flush-test', (sql) => {
    if (!sql.includes('usage_record') || !gate) return undefined;
    const wait = gate;
    gate = undefined;
    return wait;
  });
  fx.onClose(() => pool.end());
});

describe('final flush', () => {
  it('closing while a periodic flush is in flight still writes every settled byte and returns every lease', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const gateway = await startTestGateway(pool, fx.db.url, gatewaySpec('basic'));
    const tunnel = await openTunnel(
      gateway.port,
      `127.0.0.1:${fx.origin.port}`,
      basicAuth(account.proxyUsername, account.proxyPassword),
    );
    expect(tunnel.status).toBe(200);
    // A periodic flush builds its batch now and then waits on the database.
    let release!: () => void;
    gate = new Promise<void>((r) => (release = r));
    const inFlight = gateway.ledger.flush();
    // 60 KB through the tunnel, settled after that batch was built.
    const closed = new Promise<void>((r) => tunnel.socket.on('close', () => r()));
    tunnel.socket.on('data', () => undefined);
    tunnel.socket.write(`GET /bytes/60000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    await closed;
    const closing = gateway.close();
    // Let close() reach the ledger (it waits for the drain first), then let the held write go.
    await new Promise((r) => setTimeout(r, 300));
    release();
    await inFlight;
    await closing;
    const usage = await recordedUsage(fx.db.pool, account.id);
    expect({ up: Number(usage.up), down: Number(usage.down) }).toEqual({
      up: tunnel.socket.bytesWritten,
      down: tunnel.socket.bytesRead,
    });
    const open = await fx.db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM bandwidth_leases WHERE released_at IS NULL',
    );
    expect(open.rows[0]!.n).toBe(0);
  }, 30_000);
});
