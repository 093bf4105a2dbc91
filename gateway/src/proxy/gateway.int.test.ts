import { beforeAll, describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { accountWithBandwidth } from '#test/fixtures.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { gatewaySpec, useTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, openTunnel, rawExchange } from '#test/gateway/client.ts';
import { fold, recordedUsage } from '#test/gateway/usage.ts';

let gateway: TestGateway;
let guarded: TestGateway;
let account: NewAccount;
let broke: NewAccount;

// The gateways start below, once the accounts exist (they load them at start).
const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  broke = await accountWithBandwidth(fx.db.pool, { advanced: 1_000_000 });
  gateway = await fx.start(gatewaySpec('basic'));
  guarded = await fx.start(gatewaySpec('basic'), { allowCidrs: [] });
});

const auth = () => basicAuth(account.proxyUsername, `${account.proxyPassword}_country-us`);

async function usageAfterFlush(accountId: string) {
  await gateway.ledger.flushSettled();
  await guarded.ledger.flushSettled();
  return recordedUsage(fx.db.pool, accountId);
}

describe('plain HTTP', () => {
  it('forwards, strips hop-by-hop and proxy headers, adds none, and bills every byte of a keep-alive connection', async () => {
    const before = await usageAfterFlush(account.id);
    const url = `http://127.0.0.1:${fx.origin.port}`;
    const { responses, written, read } = await rawExchange(gateway.port, [
      get(
        `${url}/headers`,
        auth(),
        'Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\nX-Kept: yes\r\n',
      ),
      get(`${url}/bytes/5000`, auth()),
      get(`${url}/bytes/70000`, auth()),
    ]);
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    // Header names only; the gateway's own hop to the origin carries its own Connection header.
    const forwarded = (JSON.parse(responses[0]!.body.toString()) as string[])
      .filter((_, i) => i % 2 === 0)
      .map((h) => h.toLowerCase());
    expect(forwarded).toContain('x-kept');
    for (const name of ['proxy-authorization', 'x-secret', 'keep-alive', 'via', 'x-forwarded-for'])
      expect(forwarded).not.toContain(name);
    expect(responses[2]!.body.length).toBe(70_000);
    const after = await usageAfterFlush(account.id);
    expect(after.up - before.up).toBe(written);
    expect(after.down - before.down).toBe(read);
    expect(after.requests - before.requests).toBe(3);
  });

  it('relays a large answer to a reader that stalls (back-pressure), byte for byte, then serves the next request on the connection', async () => {
    const before = await usageAfterFlush(account.id);
    const url = `http://127.0.0.1:${fx.origin.port}`;
    const size = 8_000_000;
    const socket = net.connect({ port: gateway.port, host: '127.0.0.1' });
    await new Promise<void>((r, j) => {
      socket.once('connect', () => r());
      socket.once('error', j);
    });
    socket.pause();
    socket.write(get(`${url}/bytes/${size}`, auth()));
    // Not reading: the kernel buffers and the gateway's write buffer fill, the relay pauses the
    // origin's answer; reading again must resume it from 'drain'.
    await new Promise((r) => setTimeout(r, 300));
    const chunks: Buffer[] = [];
    let got = 0;
    let wake = () => undefined as void;
    // (Explicitly paused above, so this listener does not start the flow by itself.)
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      got += chunk.length;
      wake();
    });
    const waitFor = async (done: () => boolean) => {
      while (!done()) {
        if (socket.destroyed) throw new Error(`closed after ${got} bytes`);
        await new Promise<void>((r) => (wake = r));
      }
    };
    socket.resume();
    const all = () => Buffer.concat(chunks);
    await waitFor(() => all().indexOf('\r\n\r\n') >= 0);
    const headEnd = all().indexOf('\r\n\r\n');
    const firstTotal = headEnd + 4 + size;
    await waitFor(() => got >= firstTotal);
    const first = all();
    expect(first.subarray(0, 12).toString()).toBe('HTTP/1.1 200');
    expect(first.length).toBe(firstTotal);
    expect(first.subarray(headEnd + 4).every((b) => b === 120)).toBe(true);
    socket.write(get(`${url}/bytes/10`, auth()));
    await waitFor(() => all().subarray(firstTotal).indexOf('\r\n\r\n') >= 0);
    const secondTotal = firstTotal + all().subarray(firstTotal).indexOf('\r\n\r\n') + 4 + 10;
    await waitFor(() => got >= secondTotal);
    await new Promise((r) => setTimeout(r, 50));
    expect(got).toBe(secondTotal);
    const written = socket.bytesWritten;
    const read = socket.bytesRead;
    socket.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const after = await usageAfterFlush(account.id);
    expect(after.up - before.up).toBe(written);
    expect(after.down - before.down).toBe(read);
    expect(after.requests - before.requests).toBe(2);
  });

  it('replaces Host with the target authority (RFC 9112 section 3.2.2)', async () => {
    const target = `127.0.0.1:${fx.origin.port}`;
    const { responses } = await rawExchange(gateway.port, [
      `GET http://${target}/headers HTTP/1.1\r\nHost: internal.example\r\nProxy-Authorization: ${auth()}\r\n\r\n`,
    ]);
    const raw = JSON.parse(responses[0]!.body.toString()) as string[];
    expect(raw.filter((_, i) => i % 2 === 0 && raw[i]!.toLowerCase() === 'host').length).toBe(1);
    expect(raw[raw.findIndex((h) => h.toLowerCase() === 'host') + 1]).toBe(target);
  });

  it('bills exactly what was delivered when the origin dies mid-transfer', async () => {
    const before = await usageAfterFlush(account.id);
    const { responses, written, read } = await rawExchange(gateway.port, [
      get(`http://127.0.0.1:${fx.origin.port}/kill/100000`, auth()),
    ]);
    expect(responses[0]!.status).toBe(200);
    expect(responses[0]!.body.length).toBeLessThan(200_000);
    const after = await usageAfterFlush(account.id);
    expect(after.up - before.up).toBe(written);
    expect(after.down - before.down).toBe(read);
  });

  it('refuses missing and wrong credentials with 407 and Proxy-Authenticate, and does not bill them', async () => {
    const before = await usageAfterFlush(account.id);
    for (const header of [
      undefined,
      basicAuth(account.proxyUsername, 'wrong_country-us'),
      basicAuth(account.proxyUsername, `${account.proxyPassword}_country-us_zone-x`),
    ]) {
      const { responses } = await rawExchange(gateway.port, [
        get(`http://127.0.0.1:${fx.origin.port}/peer`, header),
      ]);
      expect(responses[0]!.status).toBe(407);
      expect(responses[0]!.headers['proxy-authenticate']).toBe('Basic realm="proxyfleet"');
      expect(responses[0]!.headers['proxy-status']).toMatch(
        /^proxyfleet; error=http_request_denied; details=".+"$/,
      );
      expect(responses[0]!.headers.connection).toBe('close');
    }
    expect(await usageAfterFlush(account.id)).toEqual(before);
  });

  it('refuses 402 without bandwidth for the plan', async () => {
    const { responses } = await rawExchange(gateway.port, [
      get(`http://127.0.0.1:${fx.origin.port}/peer`, basicAuth(broke.proxyUsername, broke.proxyPassword)),
    ]);
    expect(responses[0]!.status).toBe(402);
    expect(responses[0]!.headers['proxy-status']).toContain('no basic bandwidth');
  });

  it.each([
    '127.0.0.1',
    '2130706433',
    '0x7f.0.0.1',
    '0177.0.0.1',
    '[::ffff:127.0.0.1]',
    '[::1]',
    '169.254.169.254',
    '10.1.2.3',
    '100.100.100.200',
    'localhost',
    'metadata.google.internal',
  ])('refuses 403 for guarded destination %s', async (host) => {
    const { responses } = await rawExchange(guarded.port, [
      get(`http://${host}:${fx.origin.port}/peer`, auth()),
    ]);
    expect(responses[0]!.status).toBe(403);
    expect(responses[0]!.headers['proxy-status']).toContain('error=destination_ip_prohibited');
  });

  it('refuses port 25', async () => {
    const { responses } = await rawExchange(gateway.port, [get('http://127.0.0.1:25/', auth())]);
    expect(responses[0]!.status).toBe(403);
  });
});

describe('CONNECT', () => {
  it('tunnels and bills every byte in both directions', async () => {
    const before = await usageAfterFlush(account.id);
    const t = await openTunnel(gateway.port, `127.0.0.1:${fx.origin.port}`, auth());
    expect(t.status).toBe(200);
    const payload = 'x'.repeat(3000);
    t.socket.write(
      `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: ${payload.length}\r\nConnection: close\r\n\r\n${payload}`,
    );
    const chunks: Buffer[] = [t.leftover];
    await new Promise<void>((r) => {
      t.socket.on('data', (c: Buffer) => chunks.push(c));
      t.socket.on('close', () => r());
    });
    expect(Buffer.concat(chunks).toString()).toContain(payload);
    const after = await usageAfterFlush(account.id);
    expect(after.up - before.up).toBe(t.socket.bytesWritten);
    expect(after.down - before.down).toBe(t.socket.bytesRead);
    expect(after.requests - before.requests).toBe(1);
  });

  it('refuses and closes: 407, 402, 403', async () => {
    const cases: [number, number, string | undefined, string][] = [
      [gateway.port, 407, undefined, `127.0.0.1:${fx.origin.port}`],
      [gateway.port, 402, basicAuth(broke.proxyUsername, broke.proxyPassword), `127.0.0.1:${fx.origin.port}`],
      [guarded.port, 403, auth(), `127.0.0.1:${fx.origin.port}`],
      [guarded.port, 403, auth(), `2130706433:${fx.origin.port}`],
      [guarded.port, 403, auth(), `[::ffff:7f00:1]:${fx.origin.port}`],
    ];
    for (const [port, status, header, authority] of cases) {
      const t = await openTunnel(port, authority, header);
      expect(t.status).toBe(status);
      expect(t.headers).toMatch(/proxy-status: proxyfleet; error=/i);
      if (status === 407) expect(t.headers).toMatch(/proxy-authenticate: Basic/i);
      await new Promise<void>((r) => (t.socket.destroyed ? r() : t.socket.once('close', () => r())));
    }
  });
});

describe('usage fold', () => {
  it('folds batches into balances used_bytes and requests_count', async () => {
    const recorded = await usageAfterFlush(account.id);
    await fold(fx.db.pool);
    const { rows } = await fx.db.pool.query<{
      used_bytes: number;
      requests_count: number;
      leased_bytes: number;
    }>(
      `SELECT used_bytes, requests_count, leased_bytes FROM balances WHERE account_id = $1 AND product = 'basic'`,
      [account.id],
    );
    expect(rows[0]!.used_bytes).toBe(recorded.up + recorded.down);
    expect(rows[0]!.requests_count).toBe(recorded.requests);
    expect(rows[0]!.leased_bytes).toBeGreaterThan(0);
  });
});
