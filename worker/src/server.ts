// The worker: usage roll-up, snapshots, lease reaper, alert outbox, auto-refill. Jobs come from
// the feature modules; one worker process in the fleet runs them (advisory-lock leadership).
import type { Registry } from 'prom-client';
import type { Health } from '#common/health.ts';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { JobRunner, type Job } from './jobs.ts';
import { acquireLeadership } from './leader.ts';

export interface WorkerDeps {
  pool: Pool;
  databaseUrl: string;
  logger: Logger;
  registry: Registry;
  health: Health;
  jobs: Job[];
}

export interface RunningWorker {
  runner: JobRunner;
  readonly leading: boolean;
  close(): Promise<void>;
}

export function startWorker(deps: WorkerDeps): RunningWorker {
  const runner = new JobRunner(deps.jobs, { pool: deps.pool, logger: deps.logger }, deps.registry);
  const leadership = acquireLeadership(deps.databaseUrl, deps.logger, {
    onLead: () => runner.start(),
    onLose: () => void runner.stop(),
  });
  deps.health.addInfo('workerLeader', () => leadership.leading);
  return {
    runner,
    get leading() {
      return leadership.leading;
    },
    async close() {
      await runner.stop();
      await leadership.stop();
    },
  };
}
