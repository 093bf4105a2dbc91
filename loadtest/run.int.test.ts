// `npm run loadtest:smoke` on a machine that lacks a prerequisite: one line naming what to
// install, a non-zero exit, and nothing started (no fleet member listening, no results directory).
// And the fleet itself, when a member's command is missing: it stops what it started, so nothing
// is left running (before, `spawn haproxy ENOENT` was an unhandled error that left 2 APIs, 4
// gateways and the worker running).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { REPO_ROOT } from '#test/process.ts';
import { fleetPorts } from './fleet/fleet.ts';

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

function run(script: string, args: string[], env: Record<string, string>) {
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', path.join(REPO_ROOT, script), ...args],
    {
      cwd: REPO_ROOT,
      env: { HOME: process.env.HOME ?? '/root', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise<{ code: number | null; stdout: string; stderr: string; pid: number }>((resolve) =>
    child.once('close', (code) => resolve({ code, stdout, stderr, pid: child.pid! })),
  );
}

describe('load-test prerequisites', () => {
  let bin: string;
  let fakeK6: string;
  const basePort = 23_000 + (process.pid % 40) * 100;
  beforeAll(async () => {
    bin = await mkdtemp(path.join(os.tmpdir(), 'pf-prereq-'));
    fakeK6 = path.join(bin, 'k6');
    await writeFile(fakeK6, '#!/bin/sh\nexit 0\n');
    await chmod(fakeK6, 0o755);
  });
  afterAll(async () => {
    await rm(bin, { recursive: true, force: true });
  });

  const results = async () => readdir(path.join(REPO_ROOT, 'loadtest/results')).catch(() => [] as string[]);

  it.each([
    {
      missing: 'k6',
      k6: '/nonexistent/k6',
      path: () => bin,
      line: /^loadtest: missing prerequisite: k6 not found at \/nonexistent\/k6: bash scripts\/install-tools\.sh builds it/,
    },
    {
      missing: 'haproxy',
      k6: '',
      path: () => bin,
      line: /^loadtest: missing prerequisite: haproxy not found on PATH: apt-get install haproxy \(Debian package haproxy\)$/,
    },
  ])('without $missing: one line naming it, exit 2, nothing started', async ({ k6, path: envPath, line }) => {
    const before = await results();
    const r = await run('loadtest/run.ts', ['--smoke'], {
      PATH: envPath(),
      K6: k6 || fakeK6,
      FLEET_BASE_PORT: String(basePort),
    });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr.trimEnd()).toMatch(line);
    expect(await results()).toEqual(before);
    const ports = fleetPorts(basePort);
    expect(await Promise.all([ports.api, ports.prometheus, ports.basic].map(listening))).toEqual([
      false,
      false,
      false,
    ]);
  });

  it('prometheus and promtool are named with their Debian package', async () => {
    await symlink('/bin/true', path.join(bin, 'haproxy')).catch(() => undefined);
    const r = await run('loadtest/run.ts', ['--smoke'], { PATH: bin, K6: fakeK6 });
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd()).toBe(
      'loadtest: missing prerequisite: prometheus not found on PATH: apt-get install prometheus (Debian package prometheus)',
    );
  });

  it('the fleet, when a member cannot start (haproxy missing), stops everything it started', async () => {
    const fleetBin = await mkdtemp(path.join(os.tmpdir(), 'pf-fleet-bin-'));
    try {
      for (const tool of ['openssl', 'prometheus']) {
        const found = (process.env.PATH ?? '')
          .split(':')
          .map((d) => path.join(d, tool))
          .find((f) => existsSync(f));
        if (found) await symlink(found, path.join(fleetBin, tool));
      }
      const port = basePort + 50 - (basePort % 100) + 1_000;
      const r = await run('loadtest/fleet/main.ts', [], {
        PATH: fleetBin,
        FLEET_BASE_PORT: String(port),
        DATABASE_URL: process.env.DATABASE_URL ?? '',
      });
      expect(r.code).not.toBe(0);
      expect(`${r.stdout}${r.stderr}`).toMatch(/haproxy exited at start/);
      expect(`${r.stdout}${r.stderr}`).not.toMatch(/Unhandled|ENOENT\n\s+at /);
      const ports = fleetPorts(port);
      const members = [
        ...ports.apis,
        ...ports.basicGateways,
        ...ports.gatewayHealth,
        ports.workerHealth,
        ports.originHttp,
      ];
      expect(await Promise.all(members.map(listening))).toEqual(members.map(() => false));
    } finally {
      await rm(fleetBin, { recursive: true, force: true });
    }
  }, 120_000);
});
