// The worker as its own process (worker/src/main.ts) on a test database, for end-to-end tests with
// real gateway processes: health on a free port, a data directory of its own; and the database,
// job context and SMTP server of the jobs' tests (useJobContext).
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '#common/logger.ts';
import type { JobContext } from '../worker/src/jobs.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { jestHooks } from './hooks.ts';
import { startEntrypoint, type RunningProcess } from './process.ts';
import { startTestSmtpServer, type TestSmtpServer } from './smtp.ts';

/** Starts the worker process; resolves once its health server listens. `env` adds or overrides. */
export async function startWorkerProcess(
  databaseUrl: string,
  env: Record<string, string> = {},
): Promise<RunningProcess> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pf-worker-'));
  const worker = startEntrypoint('worker/src/main.ts', {
    DATABASE_URL: databaseUrl,
    PROXYFLEET_HEALTH_PORT: '0',
    PROXYFLEET_HEALTH_HOST: '127.0.0.1',
    PROXYFLEET_DATA_DIR: dir,
    PROXYFLEET_DB_POOL_SIZE: '3',
    ...env,
  });
  await worker.waitForLog('worker health server listening');
  return worker;
}

export interface JobFixture {
  db: TestDatabase;
  /** What a job's run gets: the test database's pool and a silent logger. */
  ctx: JobContext;
  /** A real SMTP server for the email sender (test/smtp.ts). */
  smtp: TestSmtpServer;
}

/** A test database, a job context on it and an SMTP server, for the whole test file (job tests). */
export function useJobContext(): JobFixture {
  const fixture = {} as JobFixture;
  jestHooks().beforeAll(async () => {
    fixture.db = await createTestDatabase();
    fixture.ctx = { pool: fixture.db.pool, logger: createLogger('test', 'silent') };
    fixture.smtp = await startTestSmtpServer();
  });
  jestHooks().afterAll(async () => {
    await fixture.smtp?.close();
    await fixture.db?.drop();
  });
  return fixture;
}
