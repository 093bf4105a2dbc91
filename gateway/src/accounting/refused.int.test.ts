// A request refused after its admission is not billed (Tab.refused), however long the refusal
// takes: a tick that lands between the admission and the refusal must not bill what the client
// sent. Found by CI in gateway/src/proxy/front-end.int.test.ts, where a busy machine stretched the
// moment between a CONNECT's admission and the destination's refusal past a 250 ms tick, and the
// CONNECT head (132 bytes) was billed on one path and not on the other.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, openTunnel } from '#test/gateway/client.ts';
import { flushedUsage } from '#test/gateway/usage.ts';

/** The upstream proxy exit answers a CONNECT with 502 after this long: several ticks. */
const REFUSAL_DELAY_MS = 700;

let slowExit: net.Server;
let slowExitPort: number;

// Before the gateway starts: its one exit is this upstream proxy.
beforeAll(async () => {
  slowExit = net.createServer((s) => {
    s.on('error', () => undefined);
    s.once('data', () =>
      setTimeout(() => s.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n'), REFUSAL_DELAY_MS),
    );
  });
  await new Promise<void>((r) => slowExit.listen(0, '127.0.0.1', r));
  slowExitPort = (slowExit.address() as net.AddressInfo).port;
});

const fx = useTestGateway({
  spec: () =>
    gatewaySpec('basic', [
      { name: 'slow', upstream: { url: `http://127.0.0.1:${slowExitPort}` }, country: '*' },
    ]),
});

afterAll(async () => {
  await new Promise((r) => slowExit?.close(r));
});

describe('a request refused after admission', () => {
  it('is not billed when the refusal comes after several ticks', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const { status, socket } = await openTunnel(
      fx.gateway.port,
      '127.0.0.1:9',
      basicAuth(account.proxyUsername, account.proxyPassword),
    );
    socket.destroy();
    expect(status).toBeGreaterThanOrEqual(500);
    const usage = await flushedUsage(fx.gateway, fx.db.pool, account.id);
    expect([Number(usage.up), Number(usage.down), Number(usage.requests)]).toEqual([0, 0, 0]);
  });
});
