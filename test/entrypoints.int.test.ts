// Every entrypoint starts from its composition root against a real database, reports health on
// /healthz, /readyz and /metrics, and exits 0 on SIGTERM within its grace period (exit 1 means
// the grace period ran out).
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from './ports.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { TEST_ADMIN_TOKEN, TEST_CREDENTIALS_KEY } from './fixtures.ts';
import { startEntrypoint, stopProcess, waitForHttp, type RunningProcess } from './process.ts';

describe('entrypoints', () => {
  let db: TestDatabase;
  let gatewayConfig: string;
  const running: RunningProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-entry-'));
    gatewayConfig = path.join(dir, 'gateway.yaml');
    const gatewayPort = await freePort();
    await writeFile(
      gatewayConfig,
      `apiVersion: proxyfleet.io/v1alpha1
kind: ProxyGateway
metadata: { name: test }
spec:
  plan: basic
  port: ${gatewayPort}
  advertisedHost: 127.0.0.1
  exits: [{ name: direct, country: '*' }]
`,
    );
  });
  afterAll(async () => {
    await Promise.all(running.map(stopProcess));
    await db.drop();
  });

  const cases: Array<{ name: string; script: string; env: (port: number) => Record<string, string> }> = [
    {
      name: 'api',
      script: 'api/src/main.ts',
      env: (port) => ({
        PROXYFLEET_API_PORT: String(port),
        PROXYFLEET_API_HOST: '127.0.0.1',
        PROXYFLEET_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        PROXYFLEET_CREDENTIALS_KEY: TEST_CREDENTIALS_KEY.toString('hex'),
      }),
    },
    {
      name: 'worker',
      script: 'worker/src/main.ts',
      env: (port) => ({ PROXYFLEET_HEALTH_PORT: String(port) }),
    },
    {
      name: 'relay',
      script: 'relay/src/main.ts',
      env: (port) => ({ PROXYFLEET_HEALTH_PORT: String(port), PROXYFLEET_RELAY_PORT: '0' }),
    },
    {
      name: 'gateway',
      script: 'gateway/src/main.ts',
      env: (port) => ({ PROXYFLEET_HEALTH_PORT: String(port), PROXYFLEET_GATEWAY_CONFIG: gatewayConfig }),
    },
  ];

  it.each(cases)(
    '$name starts, is healthy and ready, serves metrics, and drains on SIGTERM',
    async ({ script, env }) => {
      const port = await freePort();
      const proc = startEntrypoint(script, {
        DATABASE_URL: db.url,
        PROXYFLEET_HEALTH_HOST: '127.0.0.1',
        PROXYFLEET_SHUTDOWN_GRACE_SECONDS: '10',
        ...env(port),
      });
      running.push(proc);
      // A cold start (module loading, migrations checked) can take tens of seconds on a busy machine.
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 200, 45_000);
      const ready = JSON.parse(await waitForHttp(`http://127.0.0.1:${port}/readyz`)) as {
        ready: boolean;
        checks: Record<string, string>;
      };
      expect(ready.ready).toBe(true);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toContain('proxyfleet_process_resident_memory_bytes');
      proc.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      await proc.waitForLog('shutdown complete');
    },
    // The waits above (45 s + 20 s) and the 10 s grace period, with room: not the 30 s default.
    90_000,
  );

  it("the api answers its pod's preStop on its health port only: not ready at once, then the answer once no new connection came for 3 s", async () => {
    const [port, healthPort] = [await freePort(), await freePort()];
    const proc = startEntrypoint('api/src/main.ts', {
      DATABASE_URL: db.url,
      PROXYFLEET_HEALTH_HOST: '127.0.0.1',
      PROXYFLEET_HEALTH_PORT: String(healthPort),
      ...cases[0]!.env(port),
    });
    running.push(proc);
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 200, 45_000);
    // Not on the public port, where any client could make the pod unready.
    expect((await fetch(`http://127.0.0.1:${port}/prestop`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    const started = performance.now();
    // Before, the API set no preStop and had no health port: the pod had no hook.
    const preStop = fetch(`http://127.0.0.1:${healthPort}/prestop`).then(async (res) => ({
      status: res.status,
      body: (await res.json()) as { preStop: { ended: string; waitedMs: number } },
      at: performance.now() - started,
    }));
    await new Promise((r) => setTimeout(r, 200));
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(503);
    const answer = await preStop;
    expect(answer.status).toBe(200);
    expect(answer.body.preStop.ended).toBe('quiet');
    expect(answer.at).toBeGreaterThanOrEqual(3_000);
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  }, 90_000);

  it('refuses to start on bad configuration, naming every bad variable', async () => {
    const proc = startEntrypoint('api/src/main.ts', {
      DATABASE_URL: 'mysql://nope',
      PROXYFLEET_API_PORT: 'eighty',
    });
    running.push(proc);
    expect(await proc.exited).toBe(2);
    const output = proc.lines.join('\n');
    for (const variable of [
      'DATABASE_URL',
      'PROXYFLEET_API_PORT',
      'PROXYFLEET_ADMIN_TOKEN',
      'PROXYFLEET_CREDENTIALS_KEY',
    ]) {
      expect(output).toContain(`${variable}:`);
    }
  });

  it('exits 1 with a clear message when the database cannot be reached', async () => {
    const port = await freePort();
    const dead = await freePort();
    const proc = startEntrypoint('worker/src/main.ts', {
      DATABASE_URL: `postgresql://postgres@127.0.0.1:${dead}/none`,
      PROXYFLEET_HEALTH_PORT: String(port),
    });
    running.push(proc);
    expect(await proc.exited).toBe(1);
    expect(proc.lines.join('\n')).toMatch(/ECONNREFUSED/);
  });
});
