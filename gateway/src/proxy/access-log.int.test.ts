// The access log (docs/adr/0023): one access-log line per request, tunnel and refusal, and never a
// credential in any log. A real gateway process logs at debug; its whole output is searched for
// every secret the test sent (passwords right and wrong, the Proxy-Authorization values, their
// base64, username:password, a query-string token), and its access lines are checked against the
// bytes the clients counted.
import { beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { accountWithBandwidth } from '#test/fixtures.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { cacheSynced, gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { type GatewayProcess } from '#test/gateway/process.ts';

let gateway: GatewayProcess;
let account: NewAccount;
let log = '';
/** Every string that must never appear in the log. */
const secrets: string[] = [];
const unique = (label: string) => `${label}${randomBytes(9).toString('hex')}`;
const secret = (s: string) => (secrets.push(s), s);

interface Line {
  msg: string;
  level: string;
  [k: string]: unknown;
}
const accessLines = () =>
  log
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line)
    .filter((l) => l.msg === 'access');

/** Sends raw bytes on a fresh connection and reads until the gateway closes it (or 3 s). */
function raw(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    let got = '';
    s.on('error', () => undefined);
    s.on('data', (c: Buffer) => (got += c.toString('latin1')));
    s.once('connect', () => s.write(text));
    const timer = setTimeout(() => s.destroy(), 3_000);
    s.once('close', () => {
      clearTimeout(timer);
      resolve(got);
    });
  });
}

const expected = {
  http: { up: 0, down: 0 },
  tunnel: { up: 0, down: 0 },
};

// The gateway process starts below.
const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  secrets.push(account.proxyPassword);
  gateway = await fx.spawn(
    gatewaySpec('basic', [{ name: 'loop-2', sourceAddress: '127.0.0.2', country: '*' }]),
    {
      PROXYFLEET_LOG_LEVEL: 'debug',
      PROXYFLEET_GATEWAY_AUTH_FAILURES_PER_MINUTE: '1000',
      // No sampling: at the default 1 %, a successful request's line is info, not debug, one run in
      // a hundred (a CI run saw it); every line then has the level the test expects.
      PROXYFLEET_GATEWAY_ACCESS_LOG_SAMPLE: '0',
    },
  );
  await cacheSynced(fx.db.pool, 1);
  const port = gateway.port;
  const user = account.proxyUsername;
  const good = (password: string) => {
    const auth = secret(basicAuth(user, password));
    secret(auth.slice('Basic '.length));
    secret(`${user}:${password}`);
    return auth;
  };
  const url = `http://127.0.0.1:${fx.origin.port}`;

  // A plain request and a tunnel that succeed, with targeting in the password.
  const targeted = good(`${account.proxyPassword}_country-us`);
  const pathToken = secret(unique('pathtoken'));
  const plain = await rawExchange(port, [get(`${url}/bytes/1000/${pathToken}`, targeted)]);
  expect(plain.responses[0]!.status).toBe(200);
  expected.http = { up: plain.written, down: plain.read };
  const queryToken = secret(unique('querytoken'));
  expect(
    (await rawExchange(port, [get(`${url}/nothing?token=${queryToken}`, targeted)])).responses[0]!.status,
  ).toBe(404);

  const t = await openTunnel(port, `127.0.0.1:${fx.origin.port}`, good(account.proxyPassword));
  expect(t.status).toBe(200);
  t.socket.write(`GET /bytes/2000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  await new Promise<void>((r) => t.socket.once('close', () => r()));
  expected.tunnel = { up: t.socket.bytesWritten, down: t.socket.bytesRead };

  // Wrong passwords, both forms; a wrong username; a password with colons.
  for (const password of [unique('wrongpw'), `${unique('colon')}:x:y`]) {
    const auth = good(password);
    expect((await rawExchange(port, [get(`${url}/peer`, auth)])).responses[0]!.status).toBe(407);
    expect((await openTunnel(port, `127.0.0.1:${fx.origin.port}`, auth)).status).toBe(407);
  }
  const stranger = secret(unique('nouser'));
  const strangerAuth = secret(basicAuth(stranger, secret(unique('nouserpw'))));
  expect((await rawExchange(port, [get(`${url}/peer`, strangerAuth)])).responses[0]!.status).toBe(407);

  // Malformed: not base64, another scheme, a head the parser rejects, a head too large.
  const notBase64 = secret(`Basic ${unique('notbase64')}!!`);
  expect(await raw(port, get(`${url}/peer`, notBase64))).toMatch(/^HTTP\/1\.1 407/);
  const bearer = secret(`Bearer ${unique('bearer')}`);
  expect(
    await raw(port, `CONNECT 127.0.0.1:${fx.origin.port} HTTP/1.1\r\nProxy-Authorization: ${bearer}\r\n\r\n`),
  ).toMatch(/^HTTP\/1\.1 407/);
  const broken = secret(unique('brokenhead'));
  expect(
    await raw(port, `GET ${url}/peer HTTP/1.1\r\nProxy-Authorization: ${targeted}\r\nX y: ${broken}\r\n\r\n`),
  ).toMatch(/^HTTP\/1\.1 400/);
  const huge = secret(unique('hugehead'));
  expect(
    await raw(
      port,
      `GET ${url}/peer HTTP/1.1\r\nProxy-Authorization: ${targeted}\r\nX-Big: ${huge}${'a'.repeat(20_000)}\r\n\r\n`,
    ),
  ).toMatch(/^HTTP\/1\.1 431/);
  // Credentials in the URL's userinfo (not how a proxy is told them, but people try).
  const userinfo = secret(unique('userinfo'));
  await rawExchange(port, [get(`http://${user}:${userinfo}@127.0.0.1:${fx.origin.port}/peer`, targeted)]);

  // Stop it (SIGTERM): every line is written before the process exits.
  await gateway.stop();
  log = gateway.output();
}, 60_000);

describe('the access log', () => {
  it('never holds a password, a Proxy-Authorization value, its base64 or username:password', () => {
    expect(log.length).toBeGreaterThan(0);
    for (const s of secrets)
      expect({ secret: s, found: log.includes(s) }).toEqual({ secret: s, found: false });
    // Nor a path or query of a request.
    expect(log).not.toContain('/bytes/');
  });

  it('logs a completed plain request with its fields and the bytes the client moved', () => {
    const line = accessLines().find((l) => l.kind === 'http' && l.status === 200);
    expect(line).toMatchObject({
      level: 'debug',
      plan: 'basic',
      method: 'GET',
      target: `127.0.0.1:${fx.origin.port}`,
      account: account.id,
      exit: 'loop-2',
      exitAddress: '127.0.0.2',
      up: expected.http.up,
      down: expected.http.down,
    });
    expect(line!.reason).toBeUndefined();
    expect(typeof line!.ms).toBe('number');
  });

  it('logs a completed tunnel with the bytes the client moved', () => {
    const line = accessLines().find((l) => l.kind === 'connect' && l.status === 200);
    expect(line).toMatchObject({
      plan: 'basic',
      method: 'CONNECT',
      target: `127.0.0.1:${fx.origin.port}`,
      account: account.id,
      exit: 'loop-2',
      exitAddress: '127.0.0.2',
      up: expected.tunnel.up,
      down: expected.tunnel.down,
    });
  });

  it('logs every refusal with its reason from the refusal table', () => {
    const refusals = accessLines()
      .filter((l) => l.status !== 200)
      .map((l) => `${String(l.kind)} ${String(l.status)} ${String(l.reason)}`);
    expect(refusals).toEqual(
      expect.arrayContaining([
        'http 407 wrong_password',
        'connect 407 wrong_password',
        'http 407 unknown_user',
        'http 407 malformed_authorization',
        'connect 407 malformed_authorization',
        'http 400 malformed_request',
        'http 431 header_too_large',
      ]),
    );
    const refused = accessLines().find((l) => l.reason === 'wrong_password' && l.kind === 'http');
    expect(refused).toMatchObject({ method: 'GET', target: `127.0.0.1:${fx.origin.port}` });
    expect(refused!.up).toBeGreaterThan(0);
    expect(refused!.down).toBeGreaterThan(0);
  });
});
