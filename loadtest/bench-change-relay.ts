// `node loadtest/bench-change-relay.ts`: what the change relay (docs/adr/0105) spends per pod to
// push a change. One relay process (relay/src/main.ts, as deployed) over a scratch database with
// ACCOUNTS accounts, N streams held by this process (plain ws clients that note when each message
// arrived without parsing it, and ack as a gateway of that checkout does: this one's at most once
// a second, the other's after every batch; `--acks none`: never, the send path alone), then:
//   - the N streams connect (batches of 100) and each receives the snapshot: wall time and the
//     relay's CPU;
//   - CHANGES password resets one after the other (after 5 unmeasured): for each, the time from
//     its commit (the call resolved) to the last of the N streams receiving it, and the relay's
//     CPU per change (its read of the rows, one beat a second and the sends to N sockets).
// With `--batch K`, each change is K accounts' changes in one transaction (one batch of K rows:
// a bulk change). With `--compare DIR`, the relay of another checkout (DIR, with its
// node_modules) takes turns with this one's in the same run, on the same database, and the
// ratios are printed.
//   --pods 300,1000  --changes 100  --batch 1  --accounts 1000  --rounds 2  --acks gateway|none
//   --compare DIR
// DATABASE_URL: a server to create the scratch database on (unset: an embedded PostgreSQL).
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { createAccount, resetProxyPassword } from '#common/accounts/accounts.ts';
import { createPool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import { benchDatabase, cpuSeconds, median, p99, sleep, startProcess, stopChild } from './bench-support.ts';

const { values: args } = parseArgs({
  options: {
    pods: { type: 'string', default: '300,1000' },
    changes: { type: 'string', default: '100' },
    accounts: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '2' },
    batch: { type: 'string', default: '1' },
    acks: { type: 'string', default: 'gateway' },
    compare: { type: 'string' },
  },
});
const PODS = args.pods.split(',').map(Number);
const CHANGES = Number(args.changes);
const BATCH = Number(args.batch);
if (args.acks !== 'gateway' && args.acks !== 'none') throw new Error('--acks is gateway or none');
const ROOT = path.resolve(import.meta.dirname, '..');
const logger = createLogger('bench', 'warn');
const KEY = randomBytes(32);

interface Result {
  connectMs: number;
  connectCpuMs: number;
  snapshotBytes: number;
  pushMs: number[];
  cpuMsPerChange: number;
  /** Batch messages a stream received per change (1: each change came as one message). */
  messagesPerChange: number;
}

/**
 * N streams on the relay at `url`; `next()` resolves when each received one more change batch.
 * Each acks as a gateway does: after every batch, or at most once a second; or never.
 */
async function connect(url: string, n: number, acks: 'batch' | 'second' | 'none') {
  let received = 0;
  let wanted = 0;
  let done: (() => void) | undefined;
  let snapshotBytes = 0;
  const sockets: WebSocket[] = [];
  for (let i = 0; i < n; i += 100) {
    const batch = Array.from({ length: Math.min(100, n - i) }, (_, j) => {
      const ws = new WebSocket(`${url}?version=0&component=gateway&instance=bench-${i + j}`, {
        perMessageDeflate: false,
      });
      sockets.push(ws);
      let version = 0;
      let lastAck = 0;
      let ackTimer: NodeJS.Timeout | undefined;
      const ack = () => {
        lastAck = Date.now();
        if (acks !== 'none' && ws.readyState === WebSocket.OPEN)
          ws.send(`{"type":"ack","version":${version}}`);
      };
      const applied = () => {
        version += 1;
        if (acks !== 'second' || Date.now() - lastAck >= 1_000) ack();
        else
          ackTimer ??= setTimeout(() => {
            ackTimer = undefined;
            ack();
          }, 1_000);
      };
      ws.once('close', () => clearTimeout(ackTimer));
      return new Promise<void>((resolve, reject) => {
        ws.once('error', reject);
        ws.on('message', (data: Buffer) => {
          // `{"type":"` then the type's first letter: s(napshot), c(hanges), b(eat).
          if (data[9] === 0x73) {
            snapshotBytes = data.length;
            ack();
            resolve();
          } else if (data[9] === 0x63) {
            applied();
            if (++received >= wanted) done?.();
          }
        });
      });
    });
    await Promise.all(batch);
  }
  return {
    snapshotBytes,
    /** Resolves once every stream received the next batch. */
    next(): Promise<void> {
      wanted += n;
      return new Promise((resolve) => {
        done = resolve;
        if (received >= wanted) resolve();
      });
    },
    received: () => received,
    close: () => sockets.forEach((ws) => ws.terminate()),
  };
}

async function measure(
  dir: string,
  dbUrl: string,
  accountIds: string[],
  n: number,
  acks: 'batch' | 'second' | 'none',
): Promise<Result> {
  const { child, match } = await startProcess(
    ['--disable-warning=ExperimentalWarning', 'relay/src/main.ts'],
    {
      DATABASE_URL: dbUrl,
      PROXYFLEET_DB_POOL_SIZE: '4',
      PROXYFLEET_RELAY_HOST: '127.0.0.1',
      PROXYFLEET_RELAY_PORT: '0',
      PROXYFLEET_HEALTH_HOST: '127.0.0.1',
      PROXYFLEET_HEALTH_PORT: '0',
      PROXYFLEET_LOG_LEVEL: 'info',
    },
    /\{[^\n]*"change relay listening"[^\n]*\}/,
    dir,
  );
  const pool = createPool({ url: dbUrl, max: 2, applicationName: 'bench', logger });
  try {
    const port = (JSON.parse(match[0]) as { port: number }).port;
    const cpu0 = await cpuSeconds(child.pid);
    const t0 = performance.now();
    const streams = await connect(`ws://127.0.0.1:${port}/changes`, n, acks);
    const connectMs = performance.now() - t0;
    const connectCpuMs = ((await cpuSeconds(child.pid)) - cpu0) * 1000;
    const pick = () => accountIds[Math.floor(Math.random() * accountIds.length)]!;
    const change = async () => {
      const all = streams.next();
      if (BATCH === 1) await resetProxyPassword(pool, pick(), KEY);
      else
        await pool.query(`SELECT change_log_record('account', a, NULL) FROM unnest($1::uuid[]) AS a`, [
          Array.from({ length: BATCH }, pick),
        ]);
      const committed = performance.now();
      await all;
      return Math.max(0, performance.now() - committed);
    };
    for (let i = 0; i < 5; i++) await change();
    const pushMs: number[] = [];
    const cpu1 = await cpuSeconds(child.pid);
    const received = streams.received();
    for (let i = 0; i < CHANGES; i++) {
      pushMs.push(await change());
      await sleep(50);
    }
    const cpuMsPerChange = (((await cpuSeconds(child.pid)) - cpu1) * 1000) / CHANGES;
    // Settled: a batch split in two would have its second message counted by now.
    await sleep(200);
    const messagesPerChange = (streams.received() - received) / n / CHANGES;
    streams.close();
    return {
      connectMs,
      connectCpuMs,
      snapshotBytes: streams.snapshotBytes,
      pushMs,
      cpuMsPerChange,
      messagesPerChange,
    };
  } finally {
    await pool.end();
    await stopChild(child);
  }
}

const tmp = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-bench-change-relay-'));
const db = await benchDatabase(tmp, logger);
try {
  const pool = createPool({ url: db.url, max: 4, applicationName: 'bench', logger });
  const accountIds: string[] = [];
  for (let i = 0; i < Number(args.accounts); i++)
    accountIds.push((await createAccount(pool, { email: `relay-bench-${i}@example.test` }, KEY)).id);
  await pool.end();
  const targets = [
    { name: 'this', dir: ROOT },
    ...(args.compare ? [{ name: 'other', dir: args.compare }] : []),
  ];
  const results = new Map<string, Result[]>();
  for (let round = 0; round < Number(args.rounds); round++)
    for (const n of PODS)
      for (const t of round % 2 ? [...targets].reverse() : targets) {
        const acks = args.acks === 'none' ? 'none' : t.name === 'this' ? 'second' : 'batch';
        const r = await measure(t.dir, db.url, accountIds, n, acks);
        const key = `${t.name} ${n}`;
        results.set(key, [...(results.get(key) ?? []), r]);
        process.stdout.write(
          `round ${round + 1}, ${t.name}, ${n} pods: push p50 ${median(r.pushMs).toFixed(1)} ms, p99 ${p99(r.pushMs).toFixed(1)} ms; relay CPU ${r.cpuMsPerChange.toFixed(2)} ms per change; snapshot (${r.snapshotBytes} bytes) to all in ${r.connectMs.toFixed(0)} ms, relay CPU ${r.connectCpuMs.toFixed(0)} ms; ${r.messagesPerChange.toFixed(2)} messages per change\n`,
        );
      }
  process.stdout.write(
    '\n| relay | pods | push p50 / p99 ms | relay CPU per change ms (per pod µs) | snapshots: wall / relay CPU ms |\n|---|---|---|---|---|\n',
  );
  const summary = (rs: Result[], n: number) => {
    const push = rs.flatMap((r) => r.pushMs);
    const cpu = median(rs.map((r) => r.cpuMsPerChange));
    return {
      p50: median(push),
      p99: p99(push),
      cpu,
      line: `${median(push).toFixed(1)} / ${p99(push).toFixed(1)} | ${cpu.toFixed(2)} (${((cpu / n) * 1000).toFixed(1)}) | ${median(rs.map((r) => r.connectMs)).toFixed(0)} / ${median(rs.map((r) => r.connectCpuMs)).toFixed(0)}`,
    };
  };
  for (const n of PODS) {
    const mine = summary(results.get(`this ${n}`)!, n);
    process.stdout.write(`| this | ${n} | ${mine.line} |\n`);
    const other = results.get(`other ${n}`);
    if (!other) continue;
    const theirs = summary(other, n);
    process.stdout.write(`| other | ${n} | ${theirs.line} |\n`);
    process.stdout.write(
      `| other / this | ${n} | ${(theirs.p50 / mine.p50).toFixed(2)} / ${(theirs.p99 / mine.p99).toFixed(2)} | ${(theirs.cpu / mine.cpu).toFixed(2)} | |\n`,
    );
  }
} finally {
  await db.drop();
  await rm(tmp, { recursive: true, force: true });
}
