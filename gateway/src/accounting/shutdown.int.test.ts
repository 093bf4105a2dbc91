import { describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get } from '#test/gateway/client.ts';
import { recordedUsage } from '#test/gateway/usage.ts';
import { spawnGateway } from '#test/gateway/process.ts';

// Each test starts and stops its own gateway.
const fx = useTestGateway({ gateway: false });

/**
 * Starts a request on a raw connection and counts every byte the client moves until it closes;
 * `started` resolves with the first bytes of the answer (the gateway has the transfer under way).
 */
function transfer(
  port: number,
  request: string,
): { started: Promise<void>; done: Promise<{ written: number; read: number }> } {
  const socket = net.connect({ port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  socket.on('connect', () => socket.write(request));
  socket.on('data', () => undefined);
  return {
    started: new Promise((r) => socket.once('data', () => r())),
    done: new Promise((r) =>
      socket.on('close', () => r({ written: socket.bytesWritten, read: socket.bytesRead })),
    ),
  };
}

describe('graceful shutdown', () => {
  it.each([
    // grace seconds, transfer ms: drained to the end, or cut at the drain deadline
    ['drains transfers in progress', 12, 2_000],
    ['cuts transfers at the drain deadline', 8, 6_000],
  ])(
    'SIGTERM mid-transfer %s and every byte is accounted',
    async (_name, grace, ms) => {
      const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
      const pod = await spawnGateway(fx.db.url, gatewaySpec('basic'), {
        PROXYFLEET_SHUTDOWN_GRACE_SECONDS: String(grace),
        PROXYFLEET_LOG_LEVEL: 'info',
      });
      const auth = basicAuth(account.proxyUsername, account.proxyPassword);
      const plain = transfer(
        pod.port,
        get(`http://127.0.0.1:${fx.origin.port}/slow/3000000/${ms}`, auth, 'Connection: close\r\n'),
      );
      const tunnel = transfer(
        pod.port,
        `CONNECT 127.0.0.1:${fx.origin.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\nGET /slow/2000000/${ms} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
      // SIGTERM lands mid-transfer only once both answers have begun (not after a guessed 500 ms).
      await Promise.all([plain.started, tunnel.started]);
      const exit = pod.stop('SIGTERM');
      const [a, b] = await Promise.all([plain.done, tunnel.done]);
      expect(await exit).toBe(0);
      if (ms < 5_000) expect(a.read).toBeGreaterThan(3_000_000);
      else expect(a.read).toBeLessThan(3_000_000);
      const usage = await recordedUsage(fx.db.pool, account.id);
      expect(usage.up).toBe(a.written + b.written);
      expect(usage.down).toBe(a.read + b.read);
      expect(usage.requests).toBe(2);
      const open = await fx.db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM bandwidth_leases WHERE released_at IS NULL',
      );
      expect(open.rows[0]!.n).toBe(0);
    },
    60_000,
  );
});
