// A plan that refuses credentials sent in clear (spec.tls.refuseCredentialsInClear, docs/adr/0072):
// Proxy-Authorization or SOCKS5 username/password outside TLS gets 407 `credentials_in_clear`
// (SOCKS: RFC 1929 status 0x01) whether the credentials are right or wrong, is not billed and does
// not feed the login backoff; the same credentials inside TLS are served; a request without
// credentials in clear is judged as before (the IP allowlist). No 407 in clear offers Basic
// (docs/adr/0096): Proxy-Authenticate would invite the very credentials it refuses; inside TLS
// the challenge is as on every plan. Off by default.
import { beforeAll, describe, expect, it } from '@jest/globals';
import { SocksClient } from 'socks';
import { DEFAULT_ALLOWLIST_MAX } from '#common/ip-allowlist.ts';
import { createLogger } from '#common/logger.ts';
import { Health } from '#common/health.ts';
import { Registry } from 'prom-client';
import { addAllowlistEntry } from '#api/modules/ip-allowlist/repo.ts';
import { allowlistCreate } from '#api/modules/ip-allowlist/schemas.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, connectToProxy, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { counterDelta, counterValues, flushedUsage } from '#test/gateway/usage.ts';
import { useTlsGateway } from '#test/tls.ts';
import { startGateway } from '../server.ts';

const fx = useTlsGateway({
  specs: () => [
    gatewaySpec('basic', undefined, { tls: { refuseCredentialsInClear: true } }),
    gatewaySpec('basic'),
  ],
});
let strict: TestGateway;
let lenient: TestGateway;
beforeAll(() => {
  [strict, lenient] = fx.gateways as [TestGateway, TestGateway];
});

const REFUSAL =
  'proxyfleet; error=http_request_denied; details="credentials sent in clear are refused: use the https:// proxy (TLS) on this port"';

const right = () => basicAuth(fx.account.proxyUsername, fx.account.proxyPassword);
const wrong = () => basicAuth(fx.account.proxyUsername, 'not-the-password');
const overTls = () => ({ tls: fx.trusted() });
const url = (path: string) => `http://127.0.0.1:${fx.origin.port}${path}`;

describe('credentials in clear refused', () => {
  it('answers 407 credentials_in_clear to right and wrong credentials alike, bills nothing, feeds no backoff', async () => {
    const before = await flushedUsage(strict, fx.db.pool, fx.account.id);
    const refusals = await counterValues(strict, 'proxyfleet_gateway_refusals_total');
    // More attempts than the login backoff allows from one address (20 a minute): none counts.
    for (let i = 0; i < 12; i++) {
      for (const auth of [right(), wrong()]) {
        const { responses } = await rawExchange(strict.port, [get(url('/peer'), auth)]);
        expect(responses[0]!.status).toBe(407);
        expect(responses[0]!.headers['proxy-status']).toBe(REFUSAL);
        expect(responses[0]!.headers['proxy-authenticate']).toBeUndefined();
      }
    }
    const t = await openTunnel(strict.port, `127.0.0.1:${fx.origin.port}`, right());
    expect(t.status).toBe(407);
    expect(t.headers).toContain(REFUSAL.split('details=')[1]!);
    expect(t.headers.toLowerCase()).not.toContain('proxy-authenticate');
    await new Promise((r) => (t.socket.destroyed ? r(null) : t.socket.once('close', r)));
    expect(counterDelta(await counterValues(strict, 'proxyfleet_gateway_refusals_total'), refusals)).toEqual({
      'credentials_in_clear 4xx': 25,
    });
    expect(await counterValues(strict, 'proxyfleet_gateway_auth_failures_total')).toEqual({});
    expect(await flushedUsage(strict, fx.db.pool, fx.account.id)).toEqual(before);
    // Inside TLS the same credentials are served, and not backed off.
    const { responses } = await rawExchange(strict.port, [get(url('/peer'), right())], overTls());
    expect(responses[0]!.status).toBe(200);
  });

  it('refuses SOCKS5 username/password in clear at authentication, serves it inside TLS', async () => {
    const proxy = {
      host: '127.0.0.1',
      port: strict.port,
      type: 5 as const,
      userId: fx.account.proxyUsername,
      password: fx.account.proxyPassword,
    };
    const destination = { host: '127.0.0.1', port: fx.origin.port };
    await expect(SocksClient.createConnection({ proxy, command: 'connect', destination })).rejects.toThrow(
      /Authentication failed/,
    );
    const { socket: session } = await connectToProxy(strict.port, overTls());
    const { socket } = await SocksClient.createConnection({
      proxy,
      command: 'connect',
      destination,
      existing_socket: session,
    });
    socket.destroy();
  });

  it('judges a request without credentials in clear as before (407 missing; the IP allowlist admits it)', async () => {
    const { responses } = await rawExchange(strict.port, [get(url('/peer'))]);
    expect(responses[0]!.status).toBe(407);
    expect(responses[0]!.headers['proxy-status']).toContain('proxy credentials required');
    expect(responses[0]!.headers['proxy-authenticate']).toBeUndefined();
    const tunnel = await openTunnel(strict.port, `127.0.0.1:${fx.origin.port}`);
    expect(tunnel.status).toBe(407);
    expect(tunnel.headers.toLowerCase()).not.toContain('proxy-authenticate');
    tunnel.socket.destroy();
    // Inside TLS, and on a plan that takes credentials in clear, the 407 offers Basic as always.
    const inside = await rawExchange(strict.port, [get(url('/peer'))], overTls());
    expect(inside.responses[0]!.headers['proxy-authenticate']).toBe('Basic realm="proxyfleet"');
    const lenientAnswer = await rawExchange(lenient.port, [get(url('/peer'))]);
    expect(lenientAnswer.responses[0]!.headers['proxy-authenticate']).toBe('Basic realm="proxyfleet"');
    const listed = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000 });
    const body = allowlistCreate(true).parse({ product: 'basic', cidr: '127.31.0.0/24' });
    await addAllowlistEntry(fx.db.pool, listed.id, body, DEFAULT_ALLOWLIST_MAX);
    await cacheSynced(fx.db.pool, [strict]);
    const allowed = await rawExchange(strict.port, [get(url('/peer'))], { sourceAddress: '127.31.0.9' });
    expect(allowed.responses[0]!.status).toBe(200);
  });

  it('is off by default: a plan without it serves credentials in clear next to TLS', async () => {
    const { responses } = await rawExchange(lenient.port, [get(url('/peer'), right())]);
    expect(responses[0]!.status).toBe(200);
  });

  it('cannot be set without a certificate: the gateway does not start', async () => {
    const registry = new Registry();
    await expect(
      startGateway({
        gateway: gatewaySpec('basic', undefined, { tls: { refuseCredentialsInClear: true } }),
        port: 0,
        host: '127.0.0.1',
        gatewayId: 'no-certificate',
        allowCidrs: [],
        pool: fx.db.pool,
        databaseUrl: fx.db.url,
        logger: createLogger('test', 'silent'),
        registry,
        health: new Health([registry]),
      }),
    ).rejects.toThrow(/refuseCredentialsInClear needs a certificate/);
  });
});
