// Private PostgreSQL clusters for tests and load tests that must not touch the machine's shared
// server: one started with initdb and pg_ctl on a free 127.0.0.1 port in a directory of its own,
// or a streaming replica of another made with pg_basebackup, which can be promoted. The binaries
// are Debian's (/usr/lib/postgresql/<version>/bin, the newest with pg_basebackup), or the directory
// in PROXYFLEET_PG_BIN. As root they run as the user 'postgres'. Authentication is trust, over
// 127.0.0.1 only; fsync is off (a cluster lives for one run: a crash of the server loses nothing,
// only an operating-system crash would, and the cluster is thrown away then anyway).
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { appendFile, chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './ports.ts';
import { giveToServerUser, serverUser } from './run-as.ts';

const run = promisify(execFile);

/** The directory of PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup). */
export function pgBinDir(): string {
  const fromEnv = process.env.PROXYFLEET_PG_BIN;
  if (fromEnv) return fromEnv;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, 'bin/pg_basebackup')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (!versions[0])
    throw new Error(
      'no PostgreSQL server binaries in /usr/lib/postgresql/<version>/bin: install the Debian package postgresql, or set PROXYFLEET_PG_BIN',
    );
  return path.join(root, versions[0], 'bin');
}

export type Settings = Record<string, string | number>;

const BASE_SETTINGS: Settings = {
  listen_addresses: '127.0.0.1',
  unix_socket_directories: '',
  fsync: 'off',
  wal_keep_size: '1GB',
  max_wal_senders: 10,
};

function conf(settings: Settings): string {
  return Object.entries(settings)
    .map(([k, v]) => `${k} = '${String(v).replaceAll("'", "''")}'\n`)
    .join('');
}

export class PgCluster {
  readonly name: string;
  readonly port: number;
  readonly dataDir: string;
  private readonly logFile: string;

  private constructor(name: string, port: number, dataDir: string) {
    this.name = name;
    this.port = port;
    this.dataDir = dataDir;
    this.logFile = `${dataDir}.log`;
  }

  /**
   * A new cluster in `<dir>/<name>`, started. `settings` go to its postgresql.conf (a replica
   * made from it copies them).
   */
  static async init(dir: string, name: string, settings: Settings = {}): Promise<PgCluster> {
    const cluster = new PgCluster(name, await freePort(), path.join(dir, name));
    await cluster.prepare(dir);
    await cluster.pg('initdb', [
      '-D',
      cluster.dataDir,
      '-A',
      'trust',
      '-U',
      'postgres',
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
    ]);
    await appendFile(path.join(cluster.dataDir, 'postgresql.conf'), conf({ ...BASE_SETTINGS, ...settings }));
    await cluster.start();
    return cluster;
  }

  /**
   * A streaming replica of `primary` in `<dir>/<name>` (pg_basebackup, then standby.signal and a
   * primary_conninfo naming it `name`, which synchronous_standby_names can list), started, and
   * streaming once this returns.
   */
  static async replicaOf(primary: PgCluster, dir: string, name: string): Promise<PgCluster> {
    const replica = new PgCluster(name, await freePort(), path.join(dir, name));
    await replica.prepare(dir);
    await replica.pg('pg_basebackup', [
      '-D',
      replica.dataDir,
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      'postgres',
      '-X',
      'stream',
      '-c',
      'fast',
      '--no-sync',
    ]);
    await appendFile(
      path.join(replica.dataDir, 'postgresql.auto.conf'),
      conf({
        primary_conninfo: `host=127.0.0.1 port=${primary.port} user=postgres application_name=${name}`,
      }),
    );
    await writeFile(path.join(replica.dataDir, 'standby.signal'), '');
    await giveToServerUser(serverUser(), path.join(replica.dataDir, 'standby.signal'));
    await replica.start();
    await primary.waitForStandby(name);
    return replica;
  }

  url(database = 'postgres'): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async start(): Promise<void> {
    await this.pg('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      this.logFile,
      '-o',
      `-p ${this.port}`,
      '-w',
      '-t',
      '60',
      'start',
    ]);
  }

  /** fast: clean (a primary sends its standbys all its WAL first); immediate: as a crash does. */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    if (!existsSync(path.join(this.dataDir, 'postmaster.pid'))) return;
    await this.pg('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
  }

  /** Ends recovery: the replica becomes a primary (returns once it accepts writes). */
  async promote(): Promise<void> {
    await this.pg('pg_ctl', ['-D', this.dataDir, '-w', '-t', '60', 'promote']);
  }

  /** Stops the server (immediately) and removes its files. */
  async remove(): Promise<void> {
    await this.stop('immediate').catch(() => undefined);
    await rm(this.dataDir, { recursive: true, force: true });
    await rm(this.logFile, { force: true });
  }

  /** Runs one statement on this server's `postgres` database. */
  async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
    const client = new pg.Client({ connectionString: this.url(), connectionTimeoutMillis: 5_000 });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return (await client.query<R>(sql, params)).rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** synchronous_standby_names through ALTER SYSTEM and a reload ('' for none). */
  async setSynchronousStandbys(names: string): Promise<void> {
    await this.query(`ALTER SYSTEM SET synchronous_standby_names = '${names.replaceAll("'", "''")}'`);
    await this.query('SELECT pg_reload_conf()');
    // A reload is asynchronous: wait until a new session sees the value.
    for (let i = 0; i < 100; i++) {
      const [row] = await this.query<{ v: string }>('SELECT current_setting($1) AS v', [
        'synchronous_standby_names',
      ]);
      if (row?.v === names) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`${this.name}: synchronous_standby_names is not ${names} after a reload`);
  }

  /** Waits until the standby `name` streams from this server. */
  async waitForStandby(name: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const rows = await this.query<{ state: string }>(
        'SELECT state FROM pg_stat_replication WHERE application_name = $1',
        [name],
      );
      if (rows.some((r) => r.state === 'streaming')) return;
      if (Date.now() > deadline)
        throw new Error(`${name} does not stream from ${this.name} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The postmaster's process id. */
  async pid(): Promise<number> {
    return Number((await readFile(path.join(this.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  }

  /** The process ids of the server's backends and helpers (the postmaster's children) and the postmaster. */
  async processes(): Promise<number[]> {
    const postmaster = await this.pid();
    const { stdout } = await run('ps', ['-o', 'pid=', '--ppid', String(postmaster)]).catch(() => ({
      stdout: '',
    }));
    return [
      postmaster,
      ...stdout
        .split('\n')
        .map(Number)
        .filter((n) => n > 0),
    ];
  }

  /** The WAL receiver's process id on a replica (undefined when it is not receiving). */
  async walReceiverPid(): Promise<number | undefined> {
    const [row] = await this.query<{ pid: number | null }>('SELECT pid FROM pg_stat_wal_receiver');
    return row?.pid ?? undefined;
  }

  private async prepare(dir: string): Promise<void> {
    const user = serverUser();
    await mkdir(this.dataDir, { recursive: true, mode: 0o700 });
    if (user) {
      // The server's user must pass through the parent directory (mkdtemp makes it 0700).
      await chmod(dir, 0o711);
      await giveToServerUser(user, this.dataDir);
      await writeFile(this.logFile, '');
      await giveToServerUser(user, this.logFile);
    }
  }

  private async pg(binary: string, args: string[]): Promise<void> {
    const user = serverUser();
    try {
      await run(path.join(pgBinDir(), binary), args, {
        ...(user ? { uid: user.uid, gid: user.gid } : {}),
        cwd: '/',
      });
    } catch (err) {
      const e = err as Error & { stderr?: string };
      const log = await readFile(this.logFile, 'utf8').catch(() => '');
      throw new Error(
        `${binary} (${this.name}) failed: ${e.stderr?.trim() || e.message}\n${log.slice(-1500)}`,
        {
          cause: err,
        },
      );
    }
  }
}
