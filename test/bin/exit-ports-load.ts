// Many short tunnels through a gateway exit that binds a source address (docs/gateway.md, "Exits with a source address under load"),
// for exit-ports.int.test.ts, which runs this in a network namespace of its own with a narrow
// ephemeral port range (never the machine's). One process: an origin, the gateway, the load.
// Each tunnel: CONNECT, 4 bytes up, 4 bytes back, then the customer closes first, as browsers and
// scrapers do, which leaves the gateway's connection to the origin in TIME_WAIT. The customers
// come from elsewhere in production: here they choose their own ports on 127.0.0.1
// (source-ports.ts), so that the kernel's choice of ports for unbound connects, which every
// explicitly bound port is withheld from, is left to the gateway.
// Environment: DATABASE_URL, PROXY_AUTH (a Proxy-Authorization value), TUNNELS, CONCURRENCY.
// Prints one JSON line: {tunnels, ok, refused: {"<status> <reason>": n}, clientErrors, plainStatus}.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createPool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { dialFrom, ephemeralRange, SourcePorts } from '../../gateway/src/proxy/source-ports.ts';
import { gatewaySpec, startTestGateway } from '../gateway/fixture.ts';
import { get } from '../gateway/client.ts';

const databaseUrl = process.env.DATABASE_URL!;
const auth = process.env.PROXY_AUTH!;
const tunnels = Number(process.env.TUNNELS ?? 6000);
const concurrency = Number(process.env.CONCURRENCY ?? 50);

const origin = net.createServer((s) => {
  s.on('error', () => s.destroy());
  s.on('data', () => s.write('pong'));
  s.on('end', () => s.end());
});
await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
const originPort = (origin.address() as AddressInfo).port;
const http = (await import('node:http')).createServer((_req, res) => res.end('plain'));
await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));

const pool = createPool({
  url: databaseUrl,
  max: 4,
  applicationName: 'exit-ports',
  logger: createLogger('t', 'silent'),
});
const gateway = await startTestGateway(
  pool,
  databaseUrl,
  gatewaySpec('basic', [{ name: 'bound', sourceAddress: '127.0.0.2', country: '*' }]),
);

const refused: Record<string, number> = {};
const clientErrors: Record<string, number> = {};
const clientPorts = new SourcePorts(ephemeralRange());
let ok = 0;
const once = async () => {
  let s: net.Socket;
  try {
    s = await dialFrom('127.0.0.1', clientPorts, { host: '127.0.0.1', port: gateway.port }, 10_000);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    clientErrors[code] = (clientErrors[code] ?? 0) + 1;
    return;
  }
  await new Promise<void>((resolve) => {
    let head = '';
    let phase: 'head' | 'body' = 'head';
    let got = 0;
    s.on('error', (err: NodeJS.ErrnoException) => {
      clientErrors[err.code ?? '?'] = (clientErrors[err.code ?? '?'] ?? 0) + 1;
      s.destroy();
    });
    s.once('close', () => resolve());
    s.write(`CONNECT 127.0.0.1:${originPort} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${auth}\r\n\r\n`);
    s.on('data', (chunk: Buffer) => {
      if (phase === 'body') {
        got += chunk.length;
        if (got >= 4) {
          ok++;
          s.end();
        }
        return;
      }
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      if (!head.startsWith('HTTP/1.1 200')) {
        const status = head.slice(9, 12);
        const reason = /details="([^"]*)"/.exec(head)?.[1] ?? '?';
        refused[`${status} ${reason}`] = (refused[`${status} ${reason}`] ?? 0) + 1;
        s.destroy();
        return;
      }
      phase = 'body';
      s.write('ping');
    });
  });
};
let started = 0;
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (started < tunnels) {
      started++;
      await once();
    }
  }),
);
// A plain request through the same exit afterwards (the keep-alive agent's own connection).
const plainStatus = await dialFrom(
  '127.0.0.1',
  clientPorts,
  { host: '127.0.0.1', port: gateway.port },
  10_000,
).then(
  (s) =>
    new Promise<string>((resolve) => {
      let head = '';
      s.on('data', (c: Buffer) => (head += c.toString('latin1')));
      s.once('close', () => resolve(head.slice(9, 12)));
      s.on('error', () => s.destroy());
      s.write(
        get(`http://127.0.0.1:${(http.address() as AddressInfo).port}/`, auth, 'Connection: close\r\n'),
      );
    }),
  (err: NodeJS.ErrnoException) => err.code ?? String(err),
);
process.stdout.write(`${JSON.stringify({ tunnels, ok, refused, clientErrors, plainStatus })}\n`);
await gateway.close();
await pool.end();
origin.close();
http.close();
