// A real PgBouncer (Debian package `pgbouncer`) for tests, the fleet and the load tests: started on
// a free 127.0.0.1 port with a generated configuration in a directory of its own, in front of one
// PostgreSQL server. Each logical database is a pool of its own (transaction or session mode);
// repoint() moves every pool to another server the way an operator's failover does (the ini file
// rewritten, then RELOAD), pause()/resume() hold queries for a planned switchover, restart() stops
// and starts the process on the same port. docs/adr/0068-pgbouncer-transaction-pooling.md.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import net from 'node:net';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './ports.ts';
import { until } from './process.ts';
import { serverUser } from './run-as.ts';

export interface PoolDefinition {
  /** The database on the server. */
  dbname: string;
  mode: 'transaction' | 'session';
  /** Server connections of this pool (PgBouncer's pool_size; default: defaultPoolSize). */
  size?: number;
  /** Run on each new server connection (e.g. `SET statement_timeout = 15000`). */
  connectQuery?: string;
}

export interface PgBouncerOptions {
  /** The server behind it, as a postgres URL (user and password are used for the server logins). */
  serverUrl: string;
  /** Logical database name (what clients connect to) -> pool. */
  pools: Record<string, PoolDefinition>;
  /**
   * A configuration of one's own instead of the generated one (the chart's): given the port to
   * listen on and the directory, the ini file's text.
   */
  config?: (port: number, dir: string) => string;
  defaultPoolSize?: number;
  maxClientConn?: number;
  /** Directory for the config and the log (default: a new temporary one, removed by stop()). */
  dir?: string;
}

const READY_TIMEOUT_MS = 15_000;
/** How long PgBouncer lets a query wait for a server connection before answering an error. */
export const QUERY_WAIT_TIMEOUT_SECONDS = 5;
/** How long a switchover's PAUSE may hold queries (pause() to resume()). */
export const SWITCHOVER_HOLD_SECONDS = 30;
const STOP_TIMEOUT_MS = 10_000;

/** A value of PgBouncer's connection-string syntax, quoted. */
function quote(value: string): string {
  if (/['\\\n]/.test(value)) throw new Error(`a PgBouncer setting cannot hold ' \\ or a newline: ${value}`);
  return `'${value}'`;
}

export class PgBouncer {
  readonly port: number;
  readonly dir: string;
  private server: { host: string; port: number };
  private readonly user: string;
  private readonly password: string;
  private readonly opts: PgBouncerOptions;
  private readonly ownDir: boolean;
  private child: ChildProcess | undefined;
  /** Between pause() and resume(): the configuration's query_wait_timeout is the hold's. */
  private holding = false;
  private exited: Promise<void> = Promise.resolve();

  private constructor(opts: PgBouncerOptions, port: number, dir: string, ownDir: boolean) {
    const u = new URL(opts.serverUrl);
    this.opts = opts;
    this.port = port;
    this.dir = dir;
    this.ownDir = ownDir;
    this.server = { host: u.hostname, port: Number(u.port || 5432) };
    this.user = decodeURIComponent(u.username || 'postgres');
    this.password = decodeURIComponent(u.password);
  }

  static async start(opts: PgBouncerOptions): Promise<PgBouncer> {
    const dir = opts.dir ?? (await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-pgbouncer-')));
    // The server's user (as root: 'postgres') reads the config from here.
    await chmod(dir, 0o755);
    const bouncer = new PgBouncer(opts, await freePort(), dir, opts.dir === undefined);
    try {
      await bouncer.writeConfig();
      await bouncer.launch();
    } catch (err) {
      await bouncer.stop();
      throw err;
    }
    return bouncer;
  }

  /** The URL a client uses for one of the logical databases. */
  url(database: string): string {
    return `postgresql://${encodeURIComponent(this.user)}@127.0.0.1:${this.port}/${database}`;
  }

  get configFile(): string {
    return path.join(this.dir, 'pgbouncer.ini');
  }

  get logFile(): string {
    return path.join(this.dir, 'pgbouncer.log');
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Runs one admin console command (SHOW POOLS, RELOAD, PAUSE db, ...); its rows. */
  async admin<R extends Record<string, unknown> = Record<string, unknown>>(command: string): Promise<R[]> {
    const client = new pg.Client({
      connectionString: this.url('pgbouncer'),
      connectionTimeoutMillis: 15_000,
    });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return (await client.query<R>(command)).rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /**
   * Moves every pool to another server (a promoted replica): the config is rewritten and
   * reloaded, and every server connection of the old one is closed once released (RECONNECT),
   * so nothing is sent to the old server again.
   */
  async repoint(server: { host: string; port: number }): Promise<void> {
    this.server = server;
    await this.writeConfig();
    await this.admin('RELOAD');
    await this.admin('RECONNECT');
  }

  /**
   * Holds new transactions of `database` (those in flight finish first), for up to
   * SWITCHOVER_HOLD_SECONDS: PgBouncer's query_wait_timeout also runs while a database is paused,
   * so a hold near its usual 5 s answered the queries queued first with an error just after RESUME
   * (a switchover's two 503s, docs/adr/0095). The generated configuration carries the longer
   * timeout while held, so that repoint()'s RELOAD keeps it.
   */
  async pause(database: string): Promise<void> {
    this.holding = true;
    await this.writeConfig();
    await this.admin('RELOAD');
    await this.admin(`PAUSE ${database}`);
  }

  /** Lets the held transactions go, and puts query_wait_timeout back once none is waiting. */
  async resume(database: string): Promise<void> {
    await this.admin(`RESUME ${database}`);
    // Up to 10 s; after that the usual timeout is put back all the same.
    await until(
      async () => !(await this.pools()).some((p) => p.database === database && p.clWaiting > 0),
      `the clients of ${database} to leave the queue`,
      10_000,
    ).catch(() => undefined);
    this.holding = false;
    await this.writeConfig();
    await this.admin('RELOAD');
  }

  /** Ends every client and server connection of `database` at once. */
  async kill(database: string): Promise<void> {
    await this.admin(`KILL ${database}`);
  }

  /** Stops the process (SIGTERM: immediate shutdown, every connection closed). */
  async stopProcess(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await this.exited;
    clearTimeout(timer);
  }

  /** Stops the process and starts it again on the same port. */
  async restart(): Promise<void> {
    await this.stopProcess();
    await this.launch();
  }

  /** Stops the process and removes its directory (when it made it). */
  async stop(): Promise<void> {
    await this.stopProcess();
    if (this.ownDir) await rm(this.dir, { recursive: true, force: true });
  }

  /** Server connections and waiting clients per pool (SHOW POOLS). */
  async pools(): Promise<
    {
      database: string;
      clActive: number;
      clWaiting: number;
      svActive: number;
      svIdle: number;
      svUsed: number;
    }[]
  > {
    const rows = await this.admin<Record<string, string | number>>('SHOW POOLS');
    return rows.map((r) => ({
      database: String(r.database),
      clActive: Number(r.cl_active),
      clWaiting: Number(r.cl_waiting),
      svActive: Number(r.sv_active),
      svIdle: Number(r.sv_idle),
      svUsed: Number(r.sv_used),
    }));
  }

  private async writeConfig(): Promise<void> {
    if (this.opts.config) {
      await writeFile(this.configFile, this.opts.config(this.port, this.dir), { mode: 0o644 });
      return;
    }
    const { host, port } = this.server;
    const login = `user=${quote(this.user)}${this.password ? ` password=${quote(this.password)}` : ''}`;
    const databases = Object.entries(this.opts.pools).map(([name, p]) => {
      if (!/^[a-z_][a-z0-9_]*$/.test(name))
        throw new Error(`a PgBouncer database name must be [a-z_][a-z0-9_]*: ${name}`);
      return (
        `${name} = host=${host} port=${port} dbname=${quote(p.dbname)} ${login} pool_mode=${p.mode}` +
        (p.size ? ` pool_size=${p.size}` : '') +
        (p.connectQuery ? ` connect_query=${quote(p.connectQuery)}` : '')
      );
    });
    const users = path.join(this.dir, 'users.txt');
    // Clients are trusted (127.0.0.1 only); PgBouncer still wants each user listed.
    await writeFile(users, `"${this.user}" ""\n`, { mode: 0o644 });
    const ini = `[databases]
${databases.join('\n')}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${this.port}
unix_socket_dir =
auth_type = trust
auth_file = ${users}
admin_users = ${this.user}
pool_mode = transaction
default_pool_size = ${this.opts.defaultPoolSize ?? 10}
max_client_conn = ${this.opts.maxClientConn ?? 1000}
; a failed server login is retried after 1 s (default 15 s): a promoted replica is found at once
server_login_retry = 1
server_connect_timeout = 5
; a query waiting for a server connection that cannot be opened is answered with an error after
; 5 s (default 120 s): the API answers 503 then, before its own 20 s query timeout; while a
; switchover holds the pool (pause()), as long as the hold may last
query_wait_timeout = ${this.holding ? SWITCHOVER_HOLD_SECONDS : QUERY_WAIT_TIMEOUT_SECONDS}
log_connections = 0
log_disconnections = 0
`;
    await writeFile(this.configFile, ini, { mode: 0o644 });
  }

  private async launch(): Promise<void> {
    const user = serverUser();
    const log = createWriteStream(this.logFile, { flags: 'a' });
    const child = spawn('pgbouncer', [...(user ? ['-u', user.name] : []), this.configFile], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    void this.exited.then(() => log.end());
    const failed = new Promise<never>((_, reject) => {
      child.once('error', (err) =>
        reject(new Error(`pgbouncer could not start (install the Debian package pgbouncer): ${err.message}`)),
      );
      void this.exited.then(async () =>
        reject(
          new Error(
            `pgbouncer exited at start:\n${(await readFile(this.logFile, 'utf8').catch(() => '')).slice(-2000)}`,
          ),
        ),
      );
    });
    failed.catch(() => undefined);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const ready = await Promise.race([listening(this.port), failed]);
      if (ready) return;
      if (Date.now() > deadline) throw new Error(`pgbouncer not ready within ${READY_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** The logical databases of a deployment's PgBouncer (docs/adr/0068): pooled and session. */
export const POOLED_DATABASE = 'proxyfleet';
export const SESSION_DATABASE = 'proxyfleet_session';

export interface ProxyfleetBouncer {
  bouncer: PgBouncer;
  /** DATABASE_URL: transaction mode, statement_timeout set on every server connection. */
  pooledUrl: string;
  /** PROXYFLEET_DATABASE_SESSION_URL: session mode. */
  sessionUrl: string;
}

/**
 * PgBouncer as proxyfleet is deployed behind it: a transaction pool whose server connections get
 * the statement_timeout the pool cannot send itself (pool.ts), and a session pool for LISTEN,
 * the leader lock and migrations, both on the database of `databaseUrl`.
 */
export async function startProxyfleetBouncer(
  databaseUrl: string,
  options: {
    statementTimeoutMs: number;
    poolSize?: number;
    /** Server connections of the session pool (one per LISTEN or leader session; default poolSize). */
    sessionPoolSize?: number;
    maxClientConn?: number;
    dir?: string;
    extraPools?: Record<string, PoolDefinition>;
  },
): Promise<ProxyfleetBouncer> {
  const dbname = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  const bouncer = await PgBouncer.start({
    serverUrl: databaseUrl,
    pools: {
      [POOLED_DATABASE]: {
        dbname,
        mode: 'transaction',
        connectQuery: `SET statement_timeout = ${options.statementTimeoutMs}`,
      },
      [SESSION_DATABASE]: {
        dbname,
        mode: 'session',
        ...(options.sessionPoolSize ? { size: options.sessionPoolSize } : {}),
      },
      ...options.extraPools,
    },
    ...(options.poolSize ? { defaultPoolSize: options.poolSize } : {}),
    ...(options.maxClientConn ? { maxClientConn: options.maxClientConn } : {}),
    ...(options.dir ? { dir: options.dir } : {}),
  });
  return { bouncer, pooledUrl: bouncer.url(POOLED_DATABASE), sessionUrl: bouncer.url(SESSION_DATABASE) };
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
