// `npm run bench:api`: throughput of authenticated GET /api/v1/account as a share of
// unauthenticated GET /healthz, on one API process (node api/src/main.ts) started here, in one run
// on this machine. A benchmark, not a test: it prints figures for docs/benchmarks.md.
//
// Env: DATABASE_URL (a server; a scratch database is created and dropped; unset: an embedded
// server in a temporary folder), BENCH_SECONDS per phase (default 5), BENCH_CONNECTIONS (32).
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '#common/db/embedded.ts';
import { migrate } from '#common/db/migrate.ts';
import { createLogger } from '#common/logger.ts';
import { spawnApi } from '#test/api.ts';
import { TEST_ADMIN_TOKEN } from '#test/fixtures.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const WARMUP_SECONDS = 2;

interface Phase {
  path: string;
  requests: number;
  errors: number;
  seconds: number;
  latenciesMs: number[];
}

async function load(
  port: number,
  path: string,
  seconds: number,
  headers: Record<string, string>,
): Promise<Phase> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const phase: Phase = { path, requests: 0, errors: 0, seconds, latenciesMs: [] };
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const status = await new Promise<number>((resolve) => {
          const req = http.get({ host: '127.0.0.1', port, path, agent, headers }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          });
          req.on('error', () => resolve(0));
        });
        phase.requests++;
        if (status !== 200) phase.errors++;
        if (phase.latenciesMs.length < 200_000) phase.latenciesMs.push(performance.now() - t0);
      }
    }),
  );
  phase.seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return phase;
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function admin(client: pg.Client, sql: string): Promise<void> {
  await client.query(sql);
}

async function main(): Promise<void> {
  let serverUrl = process.env.DATABASE_URL;
  let embeddedDir: string | undefined;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!serverUrl) {
    embeddedDir = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-bench-'));
    const embedded = await startEmbeddedPostgres(embeddedDir, createLogger('bench', 'warn'));
    serverUrl = embedded.url;
    stopEmbedded = () => embedded.stop();
  }
  const name = `pf_bench_${randomBytes(4).toString('hex')}`;
  const control = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await control.connect();
  await admin(control, `CREATE DATABASE ${name}`);
  const url = withDatabase(serverUrl, name);
  try {
    await migrate(url);
    // Limits far above what one machine can send: the limiter runs on every request, never refuses.
    const api = await spawnApi(url, {
      PROXYFLEET_LOG_LEVEL: 'info', // spawnApi reads the port from the "api listening" line; requests log at debug only
      PROXYFLEET_RATE_LIMIT_PER_MINUTE: '600000000',
      PROXYFLEET_RATE_LIMIT_BURST: '1000000',
    });
    try {
      const port = Number(new URL(api.url).port);
      const created = await fetch(`${api.url}/admin/v1/accounts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'bench@example.test' }),
      }).then((r) => r.json() as Promise<{ id: string; apiKey: string }>);
      await fetch(`${api.url}/admin/v1/accounts/${created.id}/purchases`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ product: 'basic', gb: 1 }),
      });
      const auth = { 'x-api-key': created.apiKey };

      await load(port, '/healthz', WARMUP_SECONDS, {});
      await load(port, '/api/v1/account', WARMUP_SECONDS, auth);
      // Alternate the two so drift on a shared machine hits both alike.
      const phases: Phase[] = [];
      for (let round = 0; round < 2; round++) {
        phases.push(await load(port, '/healthz', SECONDS, {}));
        phases.push(await load(port, '/api/v1/account', SECONDS, auth));
      }
      const summary = (p: string) => {
        const ps = phases.filter((x) => x.path === p);
        const requests = ps.reduce((n, x) => n + x.requests, 0);
        const seconds = ps.reduce((n, x) => n + x.seconds, 0);
        const latencies = ps.flatMap((x) => x.latenciesMs);
        return {
          path: p,
          rps: Math.round(requests / seconds),
          errors: ps.reduce((n, x) => n + x.errors, 0),
          p50ms: Number(percentile(latencies, 50).toFixed(2)),
          p99ms: Number(percentile(latencies, 99).toFixed(2)),
        };
      };
      const health = summary('/healthz');
      const account = summary('/api/v1/account');
      const ratio = account.rps / health.rps;
      console.log(
        `connections ${CONNECTIONS}, ${SECONDS} s x 2 per path, node ${process.version}, ${os.cpus().length} CPUs`,
      );
      console.table([health, account]);
      console.log(
        `ratio account/healthz: ${ratio.toFixed(2)} (goal >= 0.60) ${ratio >= 0.6 ? 'MET' : 'NOT MET'}`,
      );
      if (health.errors + account.errors > 0) {
        console.error('non-200 answers during the run: the figures are not valid');
        process.exitCode = 1;
      }
    } finally {
      await api.close();
    }
  } finally {
    await admin(control, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await control.end();
    await stopEmbedded?.();
    if (embeddedDir) await rm(embeddedDir, { recursive: true, force: true });
  }
}

await main();
