// `npm run fleet`: starts the fleet and keeps it up until Ctrl-C (SIGINT) or SIGTERM, then stops
// every process it started, drops its database and removes its run directory.
//   FLEET_BASE_PORT (default 18000): ports are offsets from it (docs/loadtest.md)
//   DATABASE_URL: the fleet creates (and at the end drops) its own database on that server;
//   unset: an embedded PostgreSQL in the run directory.
//   FLEET_KEEP_DIR=1 keeps the run directory (logs, configs) at the end.
//   --pgbouncer: every process reaches the database through PgBouncer (docs/adr/0068).
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { removeDir, startFleet } from './fleet.ts';

const { values: args } = parseArgs({ options: { pgbouncer: { type: 'boolean', default: false } } });

const basePort = Number(process.env.FLEET_BASE_PORT ?? 18000);
const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-fleet-'));
const say = (line: string) => process.stdout.write(`[fleet] ${line}\n`);

let stopping: Promise<void> | undefined;
let fleet: Awaited<ReturnType<typeof startFleet>> | undefined;
const finish = (code: number) => {
  stopping ??= (async () => {
    say('stopping');
    await fleet?.stop();
    if (process.env.FLEET_KEEP_DIR !== '1') await removeDir(dir);
    say('stopped: nothing left running');
    process.exit(code);
  })();
};
process.on('SIGINT', () => finish(0));
process.on('SIGTERM', () => finish(0));

try {
  fleet = await startFleet({
    basePort,
    databaseUrl: process.env.DATABASE_URL || undefined,
    dir,
    onStep: say,
    pgbouncer: args.pgbouncer,
  });
} catch (err) {
  say(`failed to start: ${err instanceof Error ? err.message : String(err)}`);
  finish(1);
}
if (fleet && !stopping) {
  const p = fleet.ports;
  say(`up in ${dir} (pids ${fleet.pids().join(' ')})`);
  say(`API (HAProxy, 2 processes)       http://127.0.0.1:${p.api}   admin token ${fleet.adminToken}`);
  say(`basic gateways (HAProxy, 3)      127.0.0.1:${p.basic}   (direct: ${p.basicGateways.join(', ')})`);
  say(
    `advanced gateway (HAProxy, 1)    127.0.0.1:${p.advanced}   (direct: ${p.advancedGateways.join(', ')})`,
  );
  say(
    `origin                           http://origin.localhost:${p.originHttp}  https://origin.localhost:${p.originHttps}`,
  );
  say(`Prometheus                       http://127.0.0.1:${p.prometheus}`);
  if (fleet.pgbouncer)
    say(`PgBouncer (transaction, session) 127.0.0.1:${fleet.pgbouncer.port}  (admin: database pgbouncer)`);
  say('Ctrl-C stops everything');
}
