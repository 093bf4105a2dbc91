// `npm start` on the embedded database: healthy within the start-up budget, /metrics served on
// the API port, a clean exit on SIGTERM, and a restart that keeps the data directory's state.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { freePort } from '#test/ports.ts';
import { startEntrypoint, stopProcess, waitForHttp, type RunningProcess } from '#test/process.ts';

describe('dev (npm start) on the embedded database', () => {
  let proc: RunningProcess | undefined;
  let dataDir: string | undefined;
  afterAll(async () => {
    await stopProcess(proc);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('starts healthy, stops on SIGTERM, and keeps its state across a restart', async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'pf-dev-'));
    const port = await freePort();
    const env = {
      PROXYFLEET_DATA_DIR: dataDir,
      PROXYFLEET_API_PORT: String(port),
      PROXYFLEET_DEV_START_GATEWAYS: 'false',
      PROXYFLEET_SHUTDOWN_GRACE_SECONDS: '20',
    };
    proc = startEntrypoint('dev/main.ts', env);
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, 200, 60_000);
    const ready = JSON.parse(await waitForHttp(`http://127.0.0.1:${port}/readyz`)) as {
      checks: Record<string, string>;
    };
    expect(ready.checks.database).toBe('ok');
    expect(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).toContain(
      'proxyfleet_db_pool_clients',
    );
    // The worker runs in this process: its metrics are on this /metrics too (the jobs', auto-refill
    // among them, the outbox's and its database gauge).
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/^proxyfleet_worker_job_failures_total\{job="auto-refill",component="dev"\} 0$/m);
    expect(metrics).toMatch(/^proxyfleet_worker_database_up\{component="dev"\} 1$/m);
    expect(metrics).toMatch(/^proxyfleet_worker_outbox_pending\{component="dev"\} 0$/m);
    expect(metrics).toMatch(/^proxyfleet_worker_outbox_oldest_pending_seconds\{component="dev"\} 0$/m);
    const token = (await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim();
    expect(proc.lines.join('\n')).toContain(token);
    const admin = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const created = await fetch(`http://127.0.0.1:${port}/admin/v1/accounts`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ email: 'restart@example.test' }),
    });
    expect(created.status).toBe(201);
    const account = (await created.json()) as { id: string; apiKey: string };
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    await proc.waitForLog('embedded PostgreSQL stopped');

    proc = startEntrypoint('dev/main.ts', env);
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 200, 60_000);
    expect((await readFile(path.join(dataDir, 'admin-token'), 'utf8')).trim()).toBe(token);
    const migrated = await proc.waitForLog(/schema up to date|migrations applied/);
    expect(migrated.msg).toBe('schema up to date');
    // The account, its key and the credentials key survived the restart.
    const again = await fetch(`http://127.0.0.1:${port}/api/v1/account`, {
      headers: { 'x-api-key': account.apiKey },
    });
    expect(again.status).toBe(200);
    expect(JSON.stringify(await again.json())).toContain(account.id);
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
  }, 120_000);
});
