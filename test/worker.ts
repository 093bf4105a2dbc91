// The worker as its own process (worker/src/main.ts) on a test database, for end-to-end tests with
// real gateway processes: health on a free port, a data directory of its own.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEntrypoint, type RunningProcess } from './process.ts';

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
