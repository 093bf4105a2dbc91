// SOCKS5 on the plan's port (docs/adr/0028), end to end: curl (socks5h) and the `socks` client
// library through a real gateway over a real database to local origins; every refusal as its
// SOCKS reply code and counted under the refusal table's reason; billing as for HTTP CONNECT;
// random handshakes never crash the gateway.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import net from 'node:net';
import fc from 'fast-check';
import { SocksClient } from 'socks';
import { billedFor, knownCustomer } from '#test/customers.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { freePort } from '#test/ports.ts';
import { setAccountStatus } from '#common/accounts/accounts.ts';
import { cacheSynced, gatewaySpec, type TestGateway, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { counterDelta, counterValues, flushedUsage } from '#test/gateway/usage.ts';
import { spawnGateway } from '#test/gateway/process.ts';

let echo: net.Server;
let echoPort: number;
let closedPort: number;

const spec = gatewaySpec('basic', undefined, {
  timeouts: { headersSeconds: 1, connectSeconds: 2, idleSeconds: 60, maxLifetimeSeconds: 600 },
});

const fx = useTestGateway({ spec });

beforeAll(async () => {
  echo = net.createServer((s) => {
    s.on('error', () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as net.AddressInfo).port;
  closedPort = await freePort();
});

afterAll(async () => {
  await new Promise((r) => echo?.close(r));
});

const customer = (bandwidth?: number) => knownCustomer(fx, bandwidth);

const usage = (accountId: string) => flushedUsage(fx.gateway, fx.db.pool, accountId);

const counted = (g: TestGateway, name: string) => counterValues(g, name);
const refusals = (g: TestGateway) => counted(g, 'proxyfleet_gateway_refusals_total');

function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['--silent', '--show-error', '--max-time', '20', ...args], (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? -1) : 0, stdout, stderr }),
    );
  });
}

/** A raw client: sends bytes, reads exactly n bytes (or what came before the gateway closed). */
class Raw {
  readonly socket: net.Socket;
  private buf = Buffer.alloc(0);
  private wake: (() => void) | undefined;
  readonly closed: Promise<void>;

  constructor(port: number, localAddress?: string) {
    this.socket = net.connect({ port, host: '127.0.0.1', ...(localAddress ? { localAddress } : {}) });
    this.socket.on('error', () => undefined);
    this.socket.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      this.wake?.();
    });
    this.closed = new Promise((r) =>
      this.socket.once('close', () => {
        r();
        this.wake?.();
      }),
    );
  }

  send(bytes: Buffer | number[]): this {
    this.socket.write(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
    return this;
  }

  async read(n: number): Promise<Buffer> {
    while (this.buf.length < n && !this.socket.destroyed) await new Promise<void>((r) => (this.wake = r));
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(out.length);
    return out;
  }

  /** Everything until the gateway closes. */
  async rest(): Promise<Buffer> {
    await this.closed;
    return this.buf;
  }
}

const GREETING = [5, 1, 2];
const credentials = (user: string, pass: string) =>
  Buffer.concat([
    Buffer.of(1, user.length),
    Buffer.from(user),
    Buffer.of(Buffer.byteLength(pass)),
    Buffer.from(pass),
  ]);
const ipv4Request = (cmd: number, address: number[], port: number) =>
  Buffer.of(5, cmd, 0, 1, ...address, port >> 8, port & 0xff);
const nameRequest = (name: string, port: number) =>
  Buffer.concat([Buffer.of(5, 1, 0, 3, name.length), Buffer.from(name), Buffer.of(port >> 8, port & 0xff)]);

/** Greeting, authentication and `request`; the reply's code (-1: none came). */
async function socksRequest(
  user: string,
  pass: string,
  request: Buffer,
): Promise<{ raw: Raw; code: number }> {
  const raw = new Raw(fx.gateway.port);
  expect([...(await raw.send(GREETING).read(2))]).toEqual([5, 2]);
  expect([...(await raw.send(credentials(user, pass)).read(2))]).toEqual([1, 0]);
  const reply = await raw.send(request).read(10);
  return { raw, code: reply.length >= 2 ? reply[1]! : -1 };
}

describe('SOCKS5 with curl', () => {
  it('downloads through socks5h and bills as the same download through HTTP CONNECT does', async () => {
    const [viaSocks, viaConnect] = await Promise.all([customer(), customer()]);
    const url = `http://localhost:${fx.origin.port}/bytes/200000`;
    const socks = await curl([
      '--proxy',
      `socks5h://${viaSocks.proxyUsername}:${viaSocks.proxyPassword}@127.0.0.1:${fx.gateway.port}`,
      '-o',
      '/dev/null',
      '-w',
      '%{http_code} %{size_download}',
      url,
    ]);
    expect(socks).toMatchObject({ code: 0, stdout: '200 200000' });
    const connect = await curl([
      '--proxytunnel',
      '--proxy',
      `http://${viaConnect.proxyUsername}:${viaConnect.proxyPassword}@127.0.0.1:${fx.gateway.port}`,
      '-o',
      '/dev/null',
      '-w',
      '%{http_code} %{size_download}',
      url,
    ]);
    expect(connect).toMatchObject({ code: 0, stdout: '200 200000' });
    const [s, c] = [await usage(viaSocks.id), await usage(viaConnect.id)];
    expect(Number(s.requests)).toBe(1);
    expect(Number(c.requests)).toBe(1);
    // The same answer inside both tunnels; around it the SOCKS replies (method 2 bytes, RFC 1929
    // status 2, request reply 10) instead of CONNECT's 39-byte 200 line.
    expect(Number(s.down)).toBe(Number(c.down) - 39 + 14);
    // Up: the same request inside; the SOCKS handshake (about 50 bytes here) instead of the
    // CONNECT head (about 170 bytes with curl's headers).
    expect(Number(s.up)).toBeLessThan(Number(c.up));
    expect(Number(c.up) - Number(s.up)).toBeLessThan(200);
  }, 60_000);

  it('takes --socks5-hostname and the plan credential grammar (targeting in the password)', async () => {
    const a = await customer();
    const result = await curl([
      '--socks5-hostname',
      `127.0.0.1:${fx.gateway.port}`,
      '--proxy-user',
      `${a.proxyUsername}:${a.proxyPassword}_country-us_session-s0cks`,
      `http://localhost:${fx.origin.port}/peer`,
    ]);
    expect(result).toMatchObject({ code: 0, stdout: '127.0.0.1' });
  }, 30_000);

  it('fails curl on a wrong password, counted as wrong_password', async () => {
    const a = await customer();
    const before = await refusals(fx.gateway);
    const result = await curl([
      '--proxy',
      `socks5h://${a.proxyUsername}:wrong${a.proxyPassword}@127.0.0.1:${fx.gateway.port}`,
      `http://localhost:${fx.origin.port}/peer`,
    ]);
    // 97: CURLE_PROXY (curl 7.73+); "(1 1)": the RFC 1929 version and status curl got.
    expect(result.code).toBe(97);
    expect(result.stderr).toMatch(/rejected by the SOCKS5 server \(1 1\)/);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ 'wrong_password 4xx': 1 });
  }, 30_000);
});

/** A CONNECT to the echo server through the gateway with the `socks` client library. */
async function socksToEcho(a: { proxyUsername: string; proxyPassword: string }): Promise<net.Socket> {
  const { socket } = await SocksClient.createConnection({
    proxy: {
      host: '127.0.0.1',
      port: fx.gateway.port,
      type: 5,
      userId: a.proxyUsername,
      password: a.proxyPassword,
    },
    command: 'connect',
    destination: { host: '127.0.0.1', port: echoPort },
  });
  return socket;
}

describe('SOCKS5 with the socks client library', () => {
  it('relays both ways through a CONNECT, billing exactly the bytes on the customer connection', async () => {
    const a = await customer();
    const socket = await socksToEcho(a);
    const payload = Buffer.alloc(50_000);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) & 0xff;
    let back = Buffer.alloc(0);
    await new Promise<void>((resolve) => {
      socket.on('data', (c: Buffer) => {
        back = Buffer.concat([back, c]);
        if (back.length >= payload.length) resolve();
      });
      socket.write(payload);
    });
    expect(back.equals(payload)).toBe(true);
    const closed = new Promise((r) => socket.once('close', r));
    socket.end();
    await closed;
    expect(await billedFor(fx, a.id, socket)).toEqual([socket.bytesWritten, socket.bytesRead, 1]);
  }, 30_000);

  it('has a live tunnel cut when the account is suspended; its next request gets 0x02', async () => {
    const a = await customer();
    const socket = await socksToEcho(a);
    socket.on('error', () => undefined);
    const closed = new Promise((r) => socket.once('close', r));
    await setAccountStatus(fx.db.pool, a.id, 'suspended');
    // (an echo tunnel stays open for a minute unless the revocation cuts it)
    await closed;
    await cacheSynced(fx.db.pool, [fx.gateway]);
    const before = await refusals(fx.gateway);
    // The credentials are right: authentication succeeds, the request is not allowed.
    const { code } = await socksRequest(
      a.proxyUsername,
      a.proxyPassword,
      ipv4Request(1, [127, 0, 0, 1], echoPort),
    );
    expect(code).toBe(0x02);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ 'account_suspended 4xx': 1 });
  }, 30_000);

  it('is told "not allowed" (0x02) for a customer without bandwidth, counted as no_bandwidth', async () => {
    const a = await customer(0);
    const before = await refusals(fx.gateway);
    await expect(socksToEcho(a)).rejects.toThrow(/NotAllowed/);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ 'no_bandwidth 4xx': 1 });
    expect(Number((await usage(a.id)).up)).toBe(0);
  }, 30_000);
});

describe('SOCKS5 for a sub-user (docs/adr/0037)', () => {
  /** A sub-user of a funded account with a traffic limit on basic, as the API stores it. */
  async function subUser(limit: number) {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const username = `su${Math.random().toString(36).slice(2, 10)}`;
    const password = `Pw${Math.random().toString(36).slice(2, 12)}`;
    const { rows } = await fx.db.pool.query<{ id: string }>(
      `INSERT INTO sub_users (account_id, name, username, password_enc, password_sha256)
       VALUES ($1, $2, $2, '\\x00'::bytea, sha256(convert_to($3, 'UTF8'))) RETURNING id`,
      [a.id, username, password],
    );
    await fx.db.pool.query(
      `INSERT INTO sub_user_products (sub_user_id, account_id, product, limit_bytes) VALUES ($1, $2, 'basic', $3)`,
      [rows[0]!.id, a.id, limit],
    );
    await cacheSynced(fx.db.pool, [fx.gateway]);
    return { account: a, proxyUsername: username, proxyPassword: password };
  }

  it('relays with its own credentials, billed to its account', async () => {
    const sub = await subUser(1_000_000);
    const socket = await socksToEcho(sub);
    const back = new Promise<number>((resolve) => {
      let n = 0;
      socket.on('data', (d: Buffer) => {
        n += d.length;
        if (n >= 1000) resolve(n);
      });
    });
    socket.write(Buffer.alloc(1000, 1));
    expect(await back).toBe(1000);
    socket.destroy();
    await new Promise((r) => setTimeout(r, 50));
    expect(Number((await usage(sub.account.id)).up)).toBeGreaterThan(1000);
  }, 30_000);

  it('is told "not allowed" (0x02) once its limit is spent, counted as sub_user_limit', async () => {
    const sub = await subUser(0);
    const before = await refusals(fx.gateway);
    await expect(socksToEcho(sub)).rejects.toThrow(/NotAllowed/);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ 'sub_user_limit 4xx': 1 });
    expect(Number((await usage(sub.account.id)).up)).toBe(0);
  }, 30_000);
});

describe('SOCKS5 refusals, byte by byte', () => {
  let user: string;
  let pass: string;
  beforeAll(async () => {
    const a = await customer();
    user = a.proxyUsername;
    pass = a.proxyPassword;
  });

  it('answers a wrong password with RFC 1929 status 0x01 and closes', async () => {
    const before = await refusals(fx.gateway);
    const raw = new Raw(fx.gateway.port);
    expect([...(await raw.send(GREETING).read(2))]).toEqual([5, 2]);
    raw.send(credentials(user, `${pass}x`));
    expect([...(await raw.rest())]).toEqual([1, 1]);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ 'wrong_password 4xx': 1 });
  });

  it('answers 0xFF to a client offering only "no authentication", and closes', async () => {
    const before = await refusals(fx.gateway);
    const raw = new Raw(fx.gateway.port).send([5, 1, 0]);
    expect([...(await raw.rest())]).toEqual([5, 0xff]);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ 'missing 4xx': 1 });
  });

  it.each([
    ['BIND', 2],
    ['UDP ASSOCIATE', 3],
    ['an unknown command', 9],
  ])('refuses %s with 0x07 (command not supported)', async (_name, cmd) => {
    const before = await refusals(fx.gateway);
    const { raw, code } = await socksRequest(user, pass, ipv4Request(cmd, [127, 0, 0, 1], echoPort));
    expect(code).toBe(0x07);
    await raw.closed;
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({
      'socks_command_not_supported 4xx': 1,
    });
  });

  it('refuses an unknown address type with 0x08', async () => {
    const before = await refusals(fx.gateway);
    const { raw, code } = await socksRequest(user, pass, Buffer.of(5, 1, 0, 2, 127, 0, 0, 1, 0, 80));
    expect(code).toBe(0x08);
    await raw.closed;
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({
      'socks_address_type_not_supported 4xx': 1,
    });
  });

  it.each([
    ['the metadata address', ipv4Request(1, [169, 254, 169, 254], 80), 'destination_prohibited 4xx'],
    ['a mail port', ipv4Request(1, [127, 0, 0, 1], 25), 'port_prohibited 4xx'],
    [
      'the IPv6 loopback (address type 4; only 127.0.0.0/8 is allowed here)',
      Buffer.of(5, 1, 0, 4, ...Buffer.alloc(15), 1, 0, 80),
      'destination_prohibited 4xx',
    ],
    [
      'a name for the metadata address',
      nameRequest('metadata.google.internal', 80),
      'destination_prohibited 4xx',
    ],
  ])('refuses %s with 0x02 (not allowed by ruleset)', async (_name, request, reason) => {
    const before = await refusals(fx.gateway);
    const { raw, code } = await socksRequest(user, pass, request);
    expect(code).toBe(0x02);
    await raw.closed;
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ [reason]: 1 });
  });

  it('answers 0x05 when the destination refuses, and 0x04 for a malformed name', async () => {
    const before = await refusals(fx.gateway);
    const refused = await socksRequest(user, pass, ipv4Request(1, [127, 0, 0, 1], closedPort));
    expect(refused.code).toBe(0x05);
    const malformed = await socksRequest(user, pass, nameRequest('a/b', 80));
    expect(malformed.code).toBe(0x04);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({
      'destination_refused 5xx': 1,
      'bad_destination 4xx': 1,
    });
  });

  it('closes a handshake that stops after the greeting at the head timeout, counted as head_timeout', async () => {
    const before = await refusals(fx.gateway);
    const raw = new Raw(fx.gateway.port).send(GREETING);
    // The method selection, then nothing until the gateway closes.
    expect([...(await raw.rest())]).toEqual([5, 2]);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ 'head_timeout 4xx': 1 });
  }, 10_000);

  it('closes a handshake the client ends half-way, counted as malformed_request', async () => {
    const before = await refusals(fx.gateway);
    const raw = new Raw(fx.gateway.port).send([5, 1, 2, 1, 10]);
    raw.socket.end();
    expect([...(await raw.rest())]).toEqual([5, 2]);
    expect(counterDelta(await refusals(fx.gateway), before)).toEqual({ 'malformed_request 4xx': 1 });
  });

  it('leaves SOCKS4 (first byte 0x04) to node:http, which answers 400', async () => {
    const raw = new Raw(fx.gateway.port).send([4, 1, 0, 80, 127, 0, 0, 1, 0]);
    expect((await raw.rest()).toString('latin1')).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('takes a whole handshake and the first data in one write', async () => {
    const raw = new Raw(fx.gateway.port).send(
      Buffer.concat([
        Buffer.from(GREETING),
        credentials(user, pass),
        ipv4Request(1, [127, 0, 0, 1], echoPort),
        Buffer.from('ping'),
      ]),
    );
    expect([...(await raw.read(14))]).toEqual([5, 2, 1, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    expect((await raw.read(4)).toString()).toBe('ping');
    raw.socket.destroy();
  });
});

describe('SOCKS5 random handshakes', () => {
  it('never crash the gateway process, which serves HTTP afterwards', async () => {
    // A gateway in its own process (main.ts), so that a throw anywhere ends it (in this process
    // jest would only print it), and with its own login backoff.
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const fuzzed = await spawnGateway(fx.db.url, spec);
    try {
      const bytes = (maxLength: number) => fc.uint8Array({ maxLength }).map((b) => [...b]);
      const byte = fc.integer({ min: 0, max: 255 });
      // A length byte that is usually true and sometimes a lie, then the bytes.
      const counted = (maxLength: number) =>
        fc.tuple(bytes(maxLength), fc.option(byte, { freq: 4 })).map(([b, lie]) => [lie ?? b.length, ...b]);
      const greeting = fc.oneof(
        fc.constant(GREETING),
        fc.tuple(fc.constantFrom(5, 5, 4, 0), counted(20)).map(([v, rest]) => [v, ...rest]),
      );
      const login = fc.oneof(
        fc.constant([...credentials(a.proxyUsername, a.proxyPassword)]),
        fc
          .tuple(fc.constantFrom(1, 1, 1, 0, 5), counted(255), counted(255))
          .map(([v, user, pass]) => [v, ...user, ...pass]),
      );
      const request = fc
        .tuple(
          fc.constantFrom(5, 5, 5, 4),
          fc.constantFrom(1, 1, 1, 2, 3, 0, 255),
          byte,
          fc.constantFrom(1, 3, 4, 0, 2, 255),
          fc.oneof(bytes(4), bytes(16), counted(255), bytes(300)),
          bytes(2),
        )
        .map(([v, cmd, rsv, atyp, address, port]) => [v, cmd, rsv, atyp, ...address, ...port]);
      const handshake = fc.oneof(
        // 0x05 and anything
        bytes(600).map((b) => [5, ...b]),
        // the three messages, each well-formed or not, cut anywhere, with anything after them
        fc.tuple(greeting, login, request, bytes(40), fc.nat()).map(([g, l, r, after, cut]) => {
          const all = [...g, ...l, ...r, ...after];
          return all.slice(0, all.length - (cut % (all.length + 1)) * Number(cut % 3 === 0));
        }),
      );
      await fc.assert(
        fc.asyncProperty(handshake, fc.boolean(), byte, byte, async (input, end, x, y) => {
          // From many loopback addresses: the failed logins would back one address off.
          const raw = new Raw(fuzzed.port, `127.1.${x}.${y}`);
          raw.send(Buffer.from(input));
          if (!end) {
            // Left open: the gateway answers or waits for more (its head timer closes it later).
            await new Promise((r) => setTimeout(r, 20));
            raw.socket.destroy();
            return;
          }
          // Ended by the client: the gateway closes, at the end itself or after its refusal.
          raw.socket.end();
          await raw.closed;
        }),
        { numRuns: 300 },
      );
      const { responses } = await rawExchange(
        fuzzed.port,
        [get(`http://127.0.0.1:${fx.origin.port}/bytes/1000`, basicAuth(a.proxyUsername, a.proxyPassword))],
        { sourceAddress: '127.0.0.2' },
      );
      expect(responses.map((r) => [r.status, r.body.length])).toEqual([[200, 1000]]);
      expect(fuzzed.output()).not.toMatch(/tunnel failed|uncaught|"level":50/i);
    } finally {
      expect(await fuzzed.stop()).toBe(0);
    }
  }, 240_000);
});
