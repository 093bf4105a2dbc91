// `npm start` as a newcomer meets it: a second start on the same data directory, Ctrl-C (SIGINT to
// the whole foreground process group), a closed terminal (SIGHUP) and `kill <npm pid>` (SIGTERM to
// npm alone). Every byte the gateway counted before the signal is billed in PostgreSQL, and no
// process (node, PostgreSQL) is left running. Root in a directory of mode 700 gets a message.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { watch } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { startEmbeddedPostgres } from '#common/db/embedded.ts';
import { freePort } from '#test/ports.ts';
import { toolsBinDir } from '#test/kube/env.ts';
import { writeDevGateways } from '#test/dev-gateways.ts';
import { createLogger } from '#common/logger.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { basicAuth, openTunnel } from '#test/gateway/client.ts';
import {
  alive,
  REPO_ROOT,
  startEntrypoint,
  stopProcess,
  until,
  waitForHttp,
  type RunningProcess,
} from '#test/process.ts';
import { stripeMockBinary } from './stripe-mock.ts';

const dirs: string[] = [];
const procs: RunningProcess[] = [];
const groups: ChildProcess[] = [];
let origin: Origin | undefined;

afterEach(async () => {
  for (const p of procs.splice(0)) await stopProcess(p);
  for (const g of groups.splice(0)) {
    if (g.exitCode === null && g.signalCode === null) {
      try {
        process.kill(-g.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
});
afterAll(async () => {
  await origin?.close();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function newDataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-life-'));
  dirs.push(dir);
  return dir;
}

async function postmasterPid(dataDir: string): Promise<number | undefined> {
  try {
    return Number((await readFile(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);
  } catch {
    return undefined;
  }
}

describe('a second npm start on the same data directory', () => {
  it('exits non-zero naming the holder, the first keeps serving, and a stale lock is taken over', async () => {
    const dataDir = await newDataDir();
    const [portA, portB] = [await freePort(), await freePort()];
    const env = (port: number) => ({
      PROXYFLEET_DATA_DIR: dataDir,
      PROXYFLEET_API_PORT: String(port),
      PROXYFLEET_DEV_START_GATEWAYS: 'false',
      PROXYFLEET_TOOLS_BIN: toolsBinDir(),
    });
    const first = startEntrypoint('dev/main.ts', env(portA));
    procs.push(first);
    await waitForHttp(`http://127.0.0.1:${portA}/readyz`, 200, 60_000);

    const second = startEntrypoint('dev/main.ts', env(portB));
    procs.push(second);
    // A bound on a hang, not a speed: a cold start on a busy machine takes far more than 15 s.
    const code = await Promise.race([
      second.exited,
      new Promise((r) => setTimeout(() => r('still running'), 60_000)),
    ]);
    expect(code).not.toBe(0);
    expect(code).not.toBe('still running');
    const output = second.lines.join('\n');
    expect(output).toContain(`pid ${first.child.pid}`);
    expect(output).toContain(dataDir);
    expect(output).not.toMatch(/\n\s+at /); // a message, not a stack

    // The first instance still serves, its database untouched.
    await new Promise((r) => setTimeout(r, 1_000));
    const ready = await fetch(`http://127.0.0.1:${portA}/readyz`);
    expect(ready.status).toBe(200);

    // The holder dies without cleaning up: the next start takes the stale lock over.
    // Its stripe-mock (npm start runs one when it is built) must not outlive it.
    const mocks = execFileSync('ps', ['-o', 'pid=,comm=', '--ppid', String(first.child.pid)], {
      encoding: 'utf8',
    })
      .split('\n')
      .filter((l) => l.includes('stripe-mock'))
      .map((l) => Number.parseInt(l, 10));
    expect(mocks).toHaveLength(stripeMockBinary(toolsBinDir()) ? 1 : 0);
    first.kill('SIGKILL');
    await first.exited;
    for (const pid of mocks)
      await until(() => !alive(pid), `stripe-mock (pid ${pid}) to exit with its npm start`);
    const third = startEntrypoint('dev/main.ts', env(portB));
    procs.push(third);
    await waitForHttp(`http://127.0.0.1:${portB}/readyz`, 200, 60_000);
    third.kill('SIGTERM');
    expect(await third.exited).toBe(0);
    const pid = await postmasterPid(dataDir);
    expect(pid === undefined || !alive(pid)).toBe(true);
  }, 240_000);
});

/** `npm start` in its own process group, as a shell runs a foreground job. */
function npmStart(env: Record<string, string>): {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | string>;
} {
  const child = spawn('npm', ['start', '--silent'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PROXYFLEET_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  groups.push(child);
  const lines: string[] = [];
  const onData = (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | string>((resolve) => child.on('exit', (c, s) => resolve(c ?? s ?? -1)));
  return { child, lines, exited };
}

function logged(lines: string[], msg: string): Record<string, unknown> | undefined {
  for (const line of lines) {
    try {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (parsed.msg === msg) return parsed;
    } catch {
      // not a log line
    }
  }
  return undefined;
}

interface Platform {
  dataDir: string;
  npm: ReturnType<typeof npmStart>;
  nodePid: number;
  apiPort: number;
  gatewayPort: number;
}

async function startPlatform(): Promise<Platform> {
  const dataDir = await newDataDir();
  const [apiPort, gatewayPort] = [await freePort(), await freePort()];
  const gateways = await writeDevGateways(dataDir, [{ plan: 'basic', port: gatewayPort }]);
  const npm = npmStart({
    PROXYFLEET_DATA_DIR: dataDir,
    PROXYFLEET_API_PORT: String(apiPort),
    PROXYFLEET_DEV_GATEWAYS: gateways,
    PROXYFLEET_GATEWAY_ALLOW_CIDRS: '127.0.0.0/8',
  });
  try {
    await waitForHttp(`http://127.0.0.1:${apiPort}/readyz`, 200, 90_000);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${npm.lines.join('\n')}`);
  }
  await until(() => logged(npm.lines, 'proxyfleet dev is up') !== undefined, 'the up line');
  const nodePid = Number(logged(npm.lines, 'proxyfleet dev is up')!.pid);
  expect(nodePid).toBeGreaterThan(0);
  return { dataDir, npm, nodePid, apiPort, gatewayPort };
}

/** An account with 1 GB of basic; returns its proxy credentials once the gateway accepts them. */
async function customer(p: Platform): Promise<{ id: string; auth: string }> {
  const token = (await readFile(path.join(p.dataDir, 'admin-token'), 'utf8')).trim();
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const base = `http://127.0.0.1:${p.apiPort}/admin/v1`;
  const created = await fetch(`${base}/accounts`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ email: `life-${Date.now()}@example.test` }),
  });
  expect(created.status).toBe(201);
  const account = (await created.json()) as { id: string; proxyUsername: string; proxyPassword: string };
  const bought = await fetch(`${base}/accounts/${account.id}/purchases`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ product: 'basic', gb: 1 }),
  });
  expect(bought.status).toBe(201);
  origin ??= await startOrigin();
  return { id: account.id, auth: basicAuth(account.proxyUsername, account.proxyPassword) };
}

/**
 * Downloads `bytes` through a CONNECT tunnel, once the gateway's credential cache knows the new
 * account (refused tunnels are not billed); returns the bytes the client moved both ways.
 */
async function download(p: Platform, auth: string, bytes: number): Promise<{ up: number; down: number }> {
  let tunnel: Awaited<ReturnType<typeof openTunnel>> | undefined;
  await until(async () => {
    tunnel = await openTunnel(p.gatewayPort, `127.0.0.1:${origin!.port}`, auth);
    if (tunnel.status !== 200) tunnel.socket.destroy();
    return tunnel.status === 200;
  }, 'the gateway to accept the new account');
  if (!tunnel) throw new Error('no tunnel');
  const { socket, leftover } = tunnel;
  let body = leftover.length;
  socket.on('data', (chunk: Buffer) => (body += chunk.length));
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  socket.write(`GET /bytes/${bytes} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  await closed;
  expect(body).toBeGreaterThan(bytes);
  return { up: socket.bytesWritten, down: socket.bytesRead };
}

/** The usage billed for an account, read from the platform's own (embedded) database. */
async function billed(dataDir: string, accountId: string): Promise<{ up: number; down: number }> {
  const db = await startEmbeddedPostgres(dataDir, createLogger('test', 'silent'));
  const client = new pg.Client({ connectionString: db.url });
  try {
    await client.connect();
    const { rows } = await client.query<{ up: string; down: string }>(
      `SELECT coalesce(sum(bytes_up), 0)::text AS up, coalesce(sum(bytes_down), 0)::text AS down
         FROM usage_batch_lines WHERE account_id = $1`,
      [accountId],
    );
    return { up: Number(rows[0]!.up), down: Number(rows[0]!.down) };
  } finally {
    await client.end().catch(() => undefined);
    await db.stop();
  }
}

async function expectAllGone(p: Platform, postgresPid: number): Promise<void> {
  await until(() => !alive(p.nodePid), `node (pid ${p.nodePid}) to exit`, 30_000);
  await until(() => !alive(postgresPid), `PostgreSQL (pid ${postgresPid}) to exit`, 30_000);
}

const DOWNLOAD_BYTES = 8 * 1024 * 1024;

describe('npm start: every signal a terminal sends bills every counted byte and leaves nothing running', () => {
  it('Ctrl-C (SIGINT to the process group) just after a download', async () => {
    const p = await startPlatform();
    const account = await customer(p);
    const moved = await download(p, account.auth, DOWNLOAD_BYTES);
    const postgresPid = (await postmasterPid(p.dataDir))!;
    process.kill(-p.npm.child.pid!, 'SIGINT');
    await p.npm.exited;
    await expectAllGone(p, postgresPid);
    expect(p.npm.lines.join('\n')).not.toContain('usage left unflushed');
    expect(await billed(p.dataDir, account.id)).toEqual(moved);
  }, 180_000);

  it('SIGHUP to npm alone (the terminal closed)', async () => {
    const p = await startPlatform();
    const account = await customer(p);
    const moved = await download(p, account.auth, DOWNLOAD_BYTES);
    const postgresPid = (await postmasterPid(p.dataDir))!;
    process.kill(p.npm.child.pid!, 'SIGHUP');
    await expectAllGone(p, postgresPid);
    expect(await billed(p.dataDir, account.id)).toEqual(moved);
  }, 180_000);

  it('SIGTERM to npm alone', async () => {
    const p = await startPlatform();
    const account = await customer(p);
    const moved = await download(p, account.auth, DOWNLOAD_BYTES);
    const postgresPid = (await postmasterPid(p.dataDir))!;
    process.kill(p.npm.child.pid!, 'SIGTERM');
    await expectAllGone(p, postgresPid);
    expect(await billed(p.dataDir, account.id)).toEqual(moved);
  }, 180_000);

  it('idle: Ctrl-C stops everything promptly (the figure is logged; the bound is generous)', async () => {
    const p = await startPlatform();
    const postgresPid = (await postmasterPid(p.dataDir))!;
    const started = Date.now();
    process.kill(-p.npm.child.pid!, 'SIGINT');
    await p.npm.exited;
    await expectAllGone(p, postgresPid);
    const ms = Date.now() - started;
    process.stdout.write(`idle shutdown of npm start: ${ms} ms\n`);
    expect(ms).toBeLessThan(45_000);
  }, 180_000);
});

const asRoot = process.getuid?.() === 0;
(asRoot ? describe : describe.skip)('as root, a data directory inside a directory of mode 700', () => {
  it('exits with a message that says how to fix it, and writes no secret to a world-readable file', async () => {
    const outer = await newDataDir(); // mkdtemp: mode 700
    expect((await stat(outer)).mode & 0o777).toBe(0o700);
    const dataDir = path.join(outer, 'data');
    await mkdir(dataDir);
    const created: string[] = [];
    const watcher = watch(os.tmpdir(), (_event, name) => name && created.push(name));
    const proc = startEntrypoint('dev/main.ts', {
      PROXYFLEET_DATA_DIR: dataDir,
      PROXYFLEET_API_PORT: String(await freePort()),
      PROXYFLEET_DEV_START_GATEWAYS: 'false',
    });
    procs.push(proc);
    const code = await proc.exited;
    watcher.close();
    expect(code).not.toBe(0);
    const output = proc.lines.join('\n');
    expect(output).toContain(outer);
    expect(output).toMatch(/DATABASE_URL/);
    expect(output).not.toContain('EACCES');
    expect(output).not.toMatch(/\n\s+at /);
    expect(created.filter((name) => /pg-password/.test(name))).toEqual([]);
    for (const name of await readdir(dataDir)) {
      const mode = (await stat(path.join(dataDir, name))).mode;
      if (/password|token|key/.test(name)) expect(mode & 0o077).toBe(0);
    }
  }, 60_000);
});
