// `node loadtest/bench-relay.ts`: what node:http's client costs a 1 MiB download, without the
// gateway around it. Two minimal relays in their own processes, taking turns against the bench
// origin (loadtest/bench-origin.ts) with 8 keep-alive connections of 1 MiB downloads, as the
// gateway bench's bulk scenario: "node:http" forwards as forward.ts does (an http.Agent with
// keep-alive, a 'data' listener writing to the ServerResponse); "raw" writes the request head on
// a pooled socket itself and relays the Content-Length body as the socket's own buffers, so no
// client parser copies each chunk (docs/benchmarks.md, bulk). A measurement sketch, not a client:
// Content-Length answers only, no errors handled. Prints each relay's CPU per MiB, per round.
// BENCH_ROUNDS (default 3), BENCH_SECONDS (default 4).
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { cpuSeconds } from './bench-support.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const CONNS = 8;
const root = path.resolve(import.meta.dirname, '..');
const HOP = /^(connection|keep-alive|proxy-authorization|proxy-connection|transfer-encoding)$/i;

function nodeHttpRelay(): http.Server {
  const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: 'lifo' });
  return http.createServer({ noDelay: true }, (req, res) => {
    const url = new URL(req.url ?? '');
    const proxyReq = http.request({
      host: url.hostname,
      port: Number(url.port),
      path: url.pathname,
      method: req.method ?? 'GET',
      headers: ['Host', url.host],
      agent,
      setHost: false,
    });
    proxyReq.on('response', (upstream) => {
      const raw = upstream.rawHeaders;
      const headers: string[] = [];
      for (let i = 0; i < raw.length; i += 2) if (!HOP.test(raw[i]!)) headers.push(raw[i]!, raw[i + 1]!);
      res.writeHead(upstream.statusCode ?? 502, upstream.statusMessage, headers);
      upstream.on('data', (chunk: Buffer) => {
        if (!res.write(chunk)) upstream.pause();
      });
      res.on('drain', () => upstream.resume());
      upstream.on('end', () => res.end());
    });
    proxyReq.end();
  });
}

function rawRelay(): http.Server {
  const pool: net.Socket[] = [];
  return http.createServer({ noDelay: true }, (req, res) => {
    const url = new URL(req.url ?? '');
    const socket = pool.pop() ?? net.connect({ host: url.hostname, port: Number(url.port), noDelay: true });
    let head: Buffer | undefined;
    let remaining = -1;
    const onDrain = () => socket.resume();
    const onData = (chunk: Buffer) => {
      if (remaining < 0) {
        head = head ? Buffer.concat([head, chunk]) : chunk;
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = head.toString('latin1', 0, end).split('\r\n');
        const [, status, ...message] = lines[0]!.split(' ');
        const headers: string[] = [];
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          const name = line.slice(0, colon);
          if (/^content-length$/i.test(name)) remaining = Number(line.slice(colon + 1));
          if (!HOP.test(name)) headers.push(name, line.slice(colon + 1).trim());
        }
        res.writeHead(Number(status), message.join(' '), headers);
        chunk = head.subarray(end + 4);
        head = undefined;
      }
      const take = Math.min(remaining, chunk.length);
      remaining -= take;
      if (take > 0 && !res.write(take === chunk.length ? chunk : chunk.subarray(0, take))) socket.pause();
      if (remaining === 0) {
        socket.off('data', onData);
        res.off('drain', onDrain);
        pool.push(socket);
        res.end();
      }
    };
    res.on('drain', onDrain);
    socket.on('data', onData);
    socket.write(`${req.method} ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
  });
}

function start(args: string[]): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (chunk: Buffer) => resolve({ child, port: Number(chunk.toString().trim()) }));
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)));
  });
}

/** 8 connections downloading /1m through the relay; the relay's CPU per MiB over SECONDS. */
async function measure(relayPort: number, originPort: number, pid: number): Promise<number> {
  const request = Buffer.from(
    `GET http://127.0.0.1:${originPort}/1m HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\n\r\n`,
  );
  let bodyBytes = 0;
  let measuring = false;
  let running = true;
  const sockets: net.Socket[] = [];
  for (let i = 0; i < CONNS; i++) {
    const socket = net.connect({ port: relayPort, host: '127.0.0.1', noDelay: true });
    sockets.push(socket);
    let head: Buffer | undefined;
    let remaining = -1;
    socket.on('data', (chunk: Buffer) => {
      let offset = 0;
      while (offset < chunk.length) {
        if (remaining < 0) {
          head = head ? Buffer.concat([head, chunk.subarray(offset)]) : chunk.subarray(offset);
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) return;
          remaining = Number(/content-length:\s*(\d+)/i.exec(head.toString('latin1', 0, end))![1]);
          offset = chunk.length - (head.length - end - 4);
          head = undefined;
        }
        const take = Math.min(remaining, chunk.length - offset);
        remaining -= take;
        offset += take;
        if (measuring) bodyBytes += take;
        if (remaining === 0) {
          remaining = -1;
          if (running) socket.write(request);
        }
      }
    });
    socket.write(request);
  }
  await sleep(1_000);
  const before = await cpuSeconds(pid);
  measuring = true;
  await sleep(SECONDS * 1000);
  measuring = false;
  const cpu = (await cpuSeconds(pid)) - before;
  running = false;
  for (const s of sockets) s.destroy();
  return (cpu / (bodyBytes / 2 ** 20)) * 1e3;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const mode = process.argv[2];
if (mode === 'node:http' || mode === 'raw') {
  const server = mode === 'raw' ? rawRelay() : nodeHttpRelay();
  server.listen(0, '127.0.0.1', () =>
    process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`),
  );
} else {
  const self = path.relative(root, import.meta.filename);
  const origin = await start(['loadtest/bench-origin.ts']);
  const relays = await Promise.all(
    (['node:http', 'raw'] as const).map(async (name) => ({ name, ...(await start([self, name])) })),
  );
  const results = new Map<string, number[]>(relays.map((r) => [r.name, []]));
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? [...relays].reverse() : relays;
      for (const r of order) results.get(r.name)!.push(await measure(r.port, origin.port, r.child.pid!));
    }
  } finally {
    for (const c of [origin.child, ...relays.map((r) => r.child)]) c.kill();
  }
  for (const [name, ms] of results)
    process.stdout.write(`${name}: ${ms.map((v) => v.toFixed(2)).join(' ')} ms CPU per MiB\n`);
}
