// The worker's periodic jobs (worker/src/jobs/); the runner runs them only while
// this process leads, never overlapping one job with itself, and records how they went.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';

export interface JobContext {
  pool: Pool;
  logger: Logger;
}

export interface Job {
  name: string;
  intervalMs: number;
  run(ctx: JobContext): Promise<void>;
}

export class JobRunner {
  private timers = new Map<string, NodeJS.Timeout>();
  private running = new Map<string, Promise<void>>();
  private active = false;
  private readonly duration: Histogram<'job'>;
  private readonly failures: Counter<'job'>;
  private readonly lastSuccess: Gauge<'job'>;

  private readonly jobs: Job[];
  private readonly ctx: JobContext;

  constructor(jobs: Job[], ctx: JobContext, registry: Registry) {
    this.jobs = jobs;
    this.ctx = ctx;
    this.duration = new Histogram({
      name: 'proxyfleet_worker_job_duration_seconds',
      help: 'Duration of worker job runs',
      labelNames: ['job'],
      registers: [registry],
    });
    this.failures = new Counter({
      name: 'proxyfleet_worker_job_failures_total',
      help: 'Worker job runs that failed',
      labelNames: ['job'],
      registers: [registry],
    });
    this.lastSuccess = new Gauge({
      name: 'proxyfleet_worker_job_last_success_timestamp_seconds',
      help: 'When each worker job last succeeded',
      labelNames: ['job'],
      registers: [registry],
    });
    // Every job's series exist from the start, at zero (an alert on failures sees 0, not no data).
    for (const job of jobs) {
      this.failures.inc({ job: job.name }, 0);
      this.duration.zero({ job: job.name });
    }
  }

  start(): void {
    if (this.active) return;
    this.active = true;
    for (const job of this.jobs) this.schedule(job, 0);
  }

  /** Stops scheduling and waits for runs in progress. */
  async stop(): Promise<void> {
    this.active = false;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled(this.running.values());
  }

  /** Runs one job now (tests, and the final run at shutdown). */
  async runOnce(name: string): Promise<void> {
    const job = this.jobs.find((j) => j.name === name);
    if (!job) throw new Error(`no job ${name}`);
    await this.execute(job);
  }

  private schedule(job: Job, delay: number): void {
    if (!this.active) return;
    const timer = setTimeout(() => {
      void this.execute(job).finally(() => this.schedule(job, job.intervalMs));
    }, delay);
    timer.unref();
    this.timers.set(job.name, timer);
  }

  private async execute(job: Job): Promise<void> {
    const previous = this.running.get(job.name);
    if (previous) await previous;
    const end = this.duration.startTimer({ job: job.name });
    const run = job.run(this.ctx).then(
      () => {
        this.lastSuccess.set({ job: job.name }, Date.now() / 1000);
      },
      (err: unknown) => {
        this.failures.inc({ job: job.name });
        this.ctx.logger.error({ err, job: job.name }, 'worker job failed');
      },
    );
    this.running.set(job.name, run);
    await run;
    end();
    this.running.delete(job.name);
  }
}
