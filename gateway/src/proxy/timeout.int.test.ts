import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { accountWithBandwidth } from '#test/fixtures.ts';
import {
  cacheSynced,
  gatewaySpec,
  ONE_SECOND_ANSWER_TIMEOUT,
  useTestGateway,
} from '#test/gateway/fixture.ts';
import { basicAuth, get } from '#test/gateway/client.ts';
import { startSilentServer, type Origin } from '#test/gateway/origin.ts';

// A destination that accepts and never answers, behind a gateway whose answer timeout is 1 s.
let silent: Origin;

const fx = useTestGateway({
  spec: gatewaySpec('basic', undefined, ONE_SECOND_ANSWER_TIMEOUT),
});

beforeAll(async () => {
  silent = await startSilentServer();
});

afterAll(() => silent.close());

const total = async (name: string) =>
  (await fx.gateway.registry.getSingleMetric(name)!.get()).values.reduce((n, v) => n + v.value, 0);

describe('forward timeout', () => {
  it('answers a destination that does not answer with one complete 504, refused once and not blamed on the exit', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const refusalsBefore = await total('proxyfleet_gateway_refusals_total');
    const socket = net.connect({ port: fx.gateway.port, host: '127.0.0.1' });
    socket.on('error', () => undefined);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.write(
      get(`http://127.0.0.1:${silent.port}/`, basicAuth(account.proxyUsername, account.proxyPassword)),
    );
    await closed;
    const text = Buffer.concat(chunks).toString('latin1');
    expect(text.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(text).toMatch(/^HTTP\/1\.1 504 /);
    expect(text).toMatch(
      /Proxy-Status: proxyfleet; error=http_response_timeout; details="the destination did not answer in time"/,
    );
    const [head, body] = text.split('\r\n\r\n') as [string, string];
    expect(Buffer.byteLength(body)).toBe(Number(/Content-Length: (\d+)/i.exec(head)![1]));
    expect(await total('proxyfleet_gateway_refusals_total')).toBe(refusalsBefore + 1);
    expect(await total('proxyfleet_gateway_exit_failures_total')).toBe(0);
  }, 20_000);
});
