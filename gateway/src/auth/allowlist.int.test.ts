// The IP allowlist end to end (docs/adr/0036): entries added through the API's schema and repo reach a real gateway
// through the change feed; clients on chosen loopback source addresses (Linux routes all of 127/8
// to lo) send requests without credentials. Exits are loopback addresses too, so the origin's
// /peer answer names the exit used (as exits.int.test.ts does).
import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import net from 'node:net';
import { setAccountStatus, type NewAccount } from '#common/accounts/accounts.ts';
import { DEFAULT_ALLOWLIST_MAX } from '#common/ip-allowlist.ts';
import { addAllowlistEntry } from '#api/modules/ip-allowlist/repo.ts';
import { allowlistCreate } from '#api/modules/ip-allowlist/schemas.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { recordedUsage } from '#test/gateway/usage.ts';

const fx = useTestGateway({
  spec: gatewaySpec('basic', [
    { name: 'us-1', sourceAddress: '127.0.0.2', country: 'us' },
    { name: 'us-2', sourceAddress: '127.0.0.3', country: 'us' },
    { name: 'us-3', sourceAddress: '127.0.0.4', country: 'us' },
    { name: 'de-1', sourceAddress: '127.0.0.5', country: 'de' },
  ]),
});

// Each test takes its own client addresses: 127.30.<n>.x.
let nextSubnet = 0;
const subnet = () => `127.30.${++nextSubnet}`;

async function allow(
  account: NewAccount,
  cidr: string,
  targeting: string | null = null,
  product = 'basic',
): Promise<string> {
  // Through the API's own schema and repo (private ranges allowed, as PROXYFLEET_IP_ALLOWLIST_PRIVATE
  // does for tests), so the gateway reads exactly what the API stores.
  const body = allowlistCreate(true).parse({ product, cidr, ...(targeting === null ? {} : { targeting }) });
  const entry = await addAllowlistEntry(fx.db.pool, account.id, body, DEFAULT_ALLOWLIST_MAX);
  await cacheSynced(fx.db.pool, [fx.gateway]);
  return entry.id;
}

async function request(from: string, auth?: string, path = '/bytes/1000') {
  const { responses } = await rawExchange(
    fx.gateway.port,
    [get(`http://127.0.0.1:${fx.origin.port}${path}`, auth)],
    {
      sourceAddress: from,
    },
  );
  return responses[0]!;
}

async function billed(accountId: string) {
  await fx.gateway.ledger.flushSettled();
  return recordedUsage(fx.db.pool, accountId);
}

/** A CONNECT tunnel from `from` to the origin, without credentials unless given. */
async function tunnel(from: string, auth?: string): Promise<{ status: number; socket: net.Socket }> {
  const socket = net.connect({ port: fx.gateway.port, host: '127.0.0.1', localAddress: from });
  socket.on('error', () => undefined);
  const target = `127.0.0.1:${fx.origin.port}`;
  socket.write(
    `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`,
  );
  let head = '';
  await new Promise<void>((resolve) => {
    const onData = (c: Buffer) => {
      head += c.toString('latin1');
      if (head.includes('\r\n\r\n')) {
        socket.off('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('close', () => resolve());
  });
  return { status: Number(head.split(' ')[1] ?? 0), socket };
}

/** One request through an open tunnel: the body of GET /peer. */
function throughTunnel(socket: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    let answer = '';
    const onData = (c: Buffer) => {
      answer += c.toString('latin1');
      const end = answer.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(answer)?.[1] ?? -1);
      if (end >= 0 && length >= 0 && answer.length >= end + 4 + length) {
        socket.off('data', onData);
        resolve(answer.slice(end + 4, end + 4 + length));
      }
    };
    socket.on('data', onData);
    socket.write('GET /peer HTTP/1.1\r\nHost: origin\r\n\r\n');
  });
}

function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('curl', ['--silent', '--show-error', '--max-time', '20', ...args], (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? -1) : 0, stdout, stderr }),
    );
  });
}

describe('IP allowlist', () => {
  it('admits a plain request and a CONNECT tunnel from an allowlisted source without credentials, billed to its account', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const net24 = subnet();
    await allow(a, `${net24}.0/24`);
    const plain = await request(`${net24}.7`);
    expect(plain.status).toBe(200);
    expect(plain.body.length).toBe(1000);
    const t = await tunnel(`${net24}.8`);
    expect(t.status).toBe(200);
    expect(await throughTunnel(t.socket)).toMatch(/^127\.0\.0\.[2-5]$/);
    t.socket.destroy();
    const usage = await billed(a.id);
    expect(usage.down).toBeGreaterThan(1000);
    expect(usage.requests).toBe(2);
    // Billed to the product of the gateway, and only there.
    const { rows } = await fx.db.pool.query<{ product: string }>(
      'SELECT DISTINCT product FROM usage_batch_lines WHERE account_id = $1',
      [a.id],
    );
    expect(rows.map((r) => r.product)).toEqual(['basic']);
  });

  it('refuses a source outside every allowlist with 407, and judges a request with credentials by them', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const b = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const s = subnet();
    await allow(a, `${s}.1/32`);
    expect((await request(`${s}.2`)).status).toBe(407);
    expect((await request(`${s}.1`, basicAuth(a.proxyUsername, 'wrongpassword'))).status).toBe(407);
    expect((await tunnel(`${s}.1`, basicAuth(a.proxyUsername, 'wrongpassword'))).status).toBe(407);
    // Right credentials of another account from a's address: b pays.
    expect((await request(`${s}.1`, basicAuth(b.proxyUsername, b.proxyPassword))).status).toBe(200);
    expect((await billed(b.id)).requests).toBe(1);
    expect((await billed(a.id)).requests).toBe(0);
  });

  it("applies the entry's targeting: a country, and a sticky session that keeps its exit", async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const s = subnet();
    await allow(a, `${s}.1/32`, 'country-de');
    await allow(a, `${s}.2/32`, 'country-us_session-allow1_lifetime-5m');
    expect((await request(`${s}.1`, undefined, '/peer')).body.toString()).toBe('127.0.0.5');
    const exits = new Set<string>();
    for (let i = 0; i < 6; i++) exits.add((await request(`${s}.2`, undefined, '/peer')).body.toString());
    expect(exits.size).toBe(1);
    expect([...exits][0]).toMatch(/^127\.0\.0\.[234]$/);
  });

  it('takes the longest prefix when entries of one account overlap', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const s = subnet();
    await allow(a, `${s}.0/24`, 'country-us');
    await allow(a, `${s}.9/32`, 'country-de');
    expect((await request(`${s}.9`, undefined, '/peer')).body.toString()).toBe('127.0.0.5');
    expect((await request(`${s}.10`, undefined, '/peer')).body.toString()).not.toBe('127.0.0.5');
  });

  it('ignores an entry of another product, and answers 402 when the account has no bandwidth', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { mobile: 1_000_000_000 });
    const s = subnet();
    await allow(a, `${s}.1/32`, null, 'mobile');
    expect((await request(`${s}.1`)).status).toBe(407);
    await allow(a, `${s}.2/32`);
    expect((await request(`${s}.2`)).status).toBe(402);
  });

  it('cuts a live tunnel admitted through an entry when the entry is removed, and only that one', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const s = subnet();
    const id = await allow(a, `${s}.1/32`);
    const viaAllowlist = await tunnel(`${s}.1`);
    const withCredentials = await tunnel(`${s}.1`, basicAuth(a.proxyUsername, a.proxyPassword));
    expect([viaAllowlist.status, withCredentials.status]).toEqual([200, 200]);
    const closed = new Promise<void>((r) => viaAllowlist.socket.once('close', () => r()));
    await fx.db.pool.query('DELETE FROM ip_allowlist WHERE id = $1', [id]);
    await closed;
    await cacheSynced(fx.db.pool, [fx.gateway]);
    expect(withCredentials.socket.destroyed).toBe(false);
    expect(await throughTunnel(withCredentials.socket)).toMatch(/^127\.0\.0\./);
    withCredentials.socket.destroy();
    expect((await request(`${s}.1`)).status).toBe(407);
  });

  it('refuses a suspended account (403) and cuts its allowlisted tunnels', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const s = subnet();
    await allow(a, `${s}.1/32`);
    const t = await tunnel(`${s}.1`);
    expect(t.status).toBe(200);
    const closed = new Promise<void>((r) => t.socket.once('close', () => r()));
    await setAccountStatus(fx.db.pool, a.id, 'suspended');
    await closed;
    await cacheSynced(fx.db.pool, [fx.gateway]);
    expect((await request(`${s}.1`)).status).toBe(403);
  });

  it('serves SOCKS5 without authentication (curl socks5h) to an allowlisted source only', async () => {
    const a = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
    const s = subnet();
    await allow(a, `${s}.1/32`, 'country-de');
    const url = `http://127.0.0.1:${fx.origin.port}/peer`;
    const ok = await curl([
      '--socks5-hostname',
      `127.0.0.1:${fx.gateway.port}`,
      '--interface',
      `${s}.1`,
      url,
    ]);
    expect(ok).toMatchObject({ code: 0, stdout: '127.0.0.5' });
    const refused = await curl([
      '--socks5-hostname',
      `127.0.0.1:${fx.gateway.port}`,
      '--interface',
      `${s}.2`,
      url,
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/authentication|No authentication method/i);
    expect((await billed(a.id)).requests).toBe(1);
  });
});
