// `npm run fleet`: every member comes up, and Ctrl-C (SIGINT to the whole process group, as a
// terminal sends it) stops everything: no member process, no listening port, no run directory and
// no fleet database is left behind.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from '@jest/globals';
import pg from 'pg';
import { alive, listening, REPO_ROOT } from '#test/process.ts';
import { fleetPorts } from './fleet.ts';

it('starts every member and leaves nothing running after Ctrl-C', async () => {
  const basePort = 21_000 + (process.pid % 40) * 100;
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', path.join(REPO_ROOT, 'loadtest/fleet/main.ts')],
    {
      cwd: REPO_ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        FLEET_BASE_PORT: String(basePort),
        DATABASE_URL: process.env.DATABASE_URL ?? '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, like a terminal's foreground job
    },
  );
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    const deadline = Date.now() + 90_000;
    while (!output.includes('Ctrl-C stops everything')) {
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`the fleet did not come up:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const pids = (/\(pids ([\d ]+)\)/.exec(output)?.[1] ?? '').split(' ').map(Number);
    const dir = /up in (\S+)/.exec(output)?.[1] ?? '';
    // The change relay, 2 APIs, 4 gateways, the worker, HAProxy, Prometheus.
    expect(pids).toHaveLength(10);
    expect(pids.every(alive)).toBe(true);
    expect(existsSync(dir)).toBe(true);
    const ports = fleetPorts(basePort);
    const all = [
      ports.api,
      ...ports.apis,
      ports.basic,
      ...ports.basicGateways,
      ports.advanced,
      ...ports.gatewayHealth,
      ports.workerHealth,
      ports.relay,
      ports.relayHealth,
      ports.originHttp,
      ports.originHttps,
      ports.prometheus,
    ];
    expect(await Promise.all(all.map(listening))).toEqual(all.map(() => true));

    process.kill(-child.pid!, 'SIGINT');
    expect(await exited).toBe(0);
    expect(output).toContain('stopped: nothing left running');
    expect(pids.filter(alive)).toEqual([]);
    expect(await Promise.all(all.map(listening))).toEqual(all.map(() => false));
    expect(existsSync(dir)).toBe(false);
    if (process.env.DATABASE_URL) {
      const db = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await db.connect();
      const { rows } = await db.query('SELECT datname FROM pg_database WHERE datname LIKE $1', [
        `proxyfleet_fleet_%_${child.pid}`,
      ]);
      await db.end();
      expect(rows).toEqual([]);
    }
  } finally {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
  }
}, 150_000);
