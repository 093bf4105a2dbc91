// `npm run loadtest` (minutes) and `npm run loadtest:smoke` (under 2 minutes, run by .ci/run):
// checks its prerequisites (one line naming what to install when one is missing; nothing started
// then), starts the fleet (loadtest/fleet; `--pgbouncer`: every process through PgBouncer,
// docs/adr/0068), runs a scenario of loadtest/scenarios/ against it (default: fleet) and judges it with k6's thresholds and PromQL through
// Prometheus's HTTP API. Results (k6 summaries, the PromQL table, verdicts) go to
// loadtest/results/<timestamp>/ (ignored by git). Exit code 0 only when every assertion held; the
// fleet is stopped on every way out (an error, SIGINT, SIGTERM). docs/loadtest.md explains each
// assertion and has the table of a full run. `--scenario failover` (`--async` there) brings its own
// fleet on a primary and a streaming replica (loadtest/scenarios/failover.ts).
import { mkdir, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { removeDir, startFleet, REPO_ROOT, type Fleet } from './fleet/fleet.ts';
import { createRunContext, finish, type RunContext } from './run/context.ts';
import { missingPrerequisite } from './run/preflight.ts';
import { fleetScenario } from './scenarios/fleet.ts';
import { runFailover } from './scenarios/failover.ts';
import { fleetProfile } from './scenarios/fleet-profile.ts';

/** A scenario: traffic and assertions on a running fleet; returns the figures for the report. */
interface Scenario {
  run(fleet: Fleet, ctx: RunContext): Promise<string[][]>;
  profile(smoke: boolean): unknown;
}
const SCENARIOS: Record<string, Scenario> = { fleet: { run: fleetScenario, profile: fleetProfile } };

const { values: args } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    scenario: { type: 'string', default: 'fleet' },
    // Every process through PgBouncer (docs/adr/0068).
    pgbouncer: { type: 'boolean', default: false },
    // With `--scenario failover`: asynchronous replication (docs/adr/0069).
    async: { type: 'boolean', default: false },
  },
});
const toolsBin = process.env.PROXYFLEET_TOOLS_BIN ?? path.join(os.homedir(), '.cache/proxyfleet/tools/bin');
const k6 = process.env.K6 ?? path.join(toolsBin, 'k6');

async function main(): Promise<number> {
  const scenario = SCENARIOS[args.scenario];
  if (!scenario && args.scenario !== 'failover') {
    process.stderr.write(
      `loadtest: unknown scenario "${args.scenario}" (one of: ${[...Object.keys(SCENARIOS), 'failover'].join(', ')})\n`,
    );
    return 2;
  }
  const missing = missingPrerequisite(k6, process.env.PATH, {
    pgbouncer: args.pgbouncer || args.scenario === 'failover',
  });
  if (missing) {
    process.stderr.write(`loadtest: missing prerequisite: ${missing}\n`);
    return 2;
  }
  // The failover scenario starts its own fleet on two database clusters it makes.
  if (!scenario) return runFailover({ smoke: args.smoke, keep: args.keep, async: args.async, k6 });
  const ctx = createRunContext({ smoke: args.smoke, k6 });
  await mkdir(ctx.resultsDir, { recursive: true });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-loadtest-'));
  const basePort = Number(process.env.FLEET_BASE_PORT ?? 18100);
  ctx.say(
    `${args.smoke ? 'smoke' : 'full'} run of ${args.scenario}, results in ${path.relative(REPO_ROOT, ctx.resultsDir)}`,
  );
  const fleet = await startFleet({
    basePort,
    databaseUrl: process.env.DATABASE_URL || undefined,
    dir,
    onStep: ctx.say,
    pgbouncer: args.pgbouncer,
  });
  const stopOnSignal = () => void fleet.stop().then(() => process.exit(130));
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    const rows = await scenario.run(fleet, ctx);
    return await finish(ctx, scenario.profile(args.smoke), rows);
  } finally {
    await fleet.stop();
    if (!args.keep) await removeDir(dir);
    else ctx.say(`fleet directory kept: ${dir}`);
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `loadtest failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
