// Exits with a source address (docs/gateway.md, "Exits with a source address under load"): CONNECT errors under load. An exit with a source address bound port 0
// before connect, so every connection, and every TIME_WAIT the gateway kept after its customer
// closed first, held a port of the exit's address for any destination: after one ephemeral range
// worth of short tunnels within a minute, every connect failed with EADDRINUSE (502 exit_failed).
// The load runs in a network namespace of its own (util-linux `unshare`, iproute2 `ip`) with a
// narrow range of 4,000 ports, so the effect shows after thousands of tunnels instead of tens of
// thousands and nothing on the machine is touched. The database is reached through a Unix socket
// that this process relays to the test server (a namespace has no route to our 127.0.0.1).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { basicAuth } from '#test/gateway/client.ts';

const PORT_RANGE = '40000 43999';
/** Half as many again as the range: before the fix the exit's address ran out of ports. */
const TUNNELS = 6_000;

let db: TestDatabase;
let dir: string;
let relay: net.Server;
const relayed = new Set<net.Socket>();

beforeAll(async () => {
  db = await createTestDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'pf-exit-ports-'));
  const server = new URL(db.url);
  relay = net.createServer((client) => {
    const upstream = net.connect({ host: server.hostname, port: Number(server.port || 5432) });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    relayed.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => relay.listen(path.join(dir, '.s.PGSQL.5432'), r));
});

afterAll(async () => {
  relay?.close();
  for (const s of relayed) s.destroy();
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function runInNamespace(env: Record<string, string>): Promise<string> {
  const script = path.join(import.meta.dirname, '../../../test/bin/exit-ports-load.ts');
  const child = spawn(
    'unshare',
    [
      '-rn',
      'sh',
      '-c',
      `ip link set lo up && echo "${PORT_RANGE}" > /proc/sys/net/ipv4/ip_local_port_range && exec "$0" "$@"`,
      process.execPath,
      script,
    ],
    { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', (e) =>
      reject(new Error(`unshare (util-linux) is needed for this test: ${e.message}`)),
    );
    child.once('exit', (code) =>
      code === 0
        ? resolve(out)
        : reject(new Error(`load in a network namespace exited ${code}: ${err}${out}`)),
    );
  });
}

describe('an exit with a source address under many short tunnels', () => {
  it(`serves ${TUNNELS} tunnels that the customer closes first, in a ${PORT_RANGE} port range, without one exit failure`, async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 1_000_000_000 });
    const url = new URL(db.url);
    const user = url.password ? `${url.username}:${url.password}` : url.username;
    const out = await runInNamespace({
      DATABASE_URL: `postgresql://${user}@/${url.pathname.slice(1)}?host=${dir}`,
      PROXY_AUTH: basicAuth(account.proxyUsername, account.proxyPassword),
      TUNNELS: String(TUNNELS),
      CONCURRENCY: '50',
    });
    const result = JSON.parse(out.trim().split('\n').pop()!) as Record<string, unknown>;
    expect(result).toEqual({
      tunnels: TUNNELS,
      ok: TUNNELS,
      refused: {},
      clientErrors: {},
      plainStatus: '200',
    });
  }, 120_000);
});
