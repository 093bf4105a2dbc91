// One active worker: the process holding a session-level advisory lock on a dedicated connection
// runs the jobs; the others wait and retry. Losing the connection loses the lock, so the holder
// stops its jobs at once and competes again. The connection must keep its session: the session
// URL, never a transaction pool, where the lock would stay on a shared server connection
// (docs/adr/0068).
import pg from 'pg';
import type { Logger } from '#common/logger.ts';

/** pg_advisory_lock key for worker leadership ("pfworker" as ASCII). */
const WORKER_LOCK_KEY = 0x7066776f726b6572n;
const RETRY_MS = 2_000;
const CHECK_MS = 5_000;
const LEADER_QUERY_TIMEOUT_MS = 5_000;
const SERVER_KEEPALIVES =
  'SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3';

export interface Leadership {
  readonly leading: boolean;
  stop(): Promise<void>;
}

export function acquireLeadership(
  url: string,
  logger: Logger,
  callbacks: { onLead: () => void; onLose: () => void },
): Leadership {
  let client: pg.Client | undefined;
  let leading = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const lose = (reason: string) => {
    if (leading) {
      leading = false;
      logger.warn({ reason }, 'worker leadership lost');
      callbacks.onLose();
    }
    const c = client;
    client = undefined;
    c?.end().catch(() => undefined);
    schedule(RETRY_MS);
  };

  const schedule = (ms: number) => {
    clearTimeout(timer);
    if (stopped) return;
    timer = setTimeout(() => void tick(), ms);
    timer.unref();
  };

  const tick = async () => {
    if (stopped) return;
    try {
      if (!client) {
        const c = new pg.Client({
          connectionString: url,
          application_name: 'proxyfleet-worker-leader',
          // A dead network must not hang the leadership check: the advisory lock would stay with
          // a session nobody can reach until TCP gives up (hours), and no other worker could lead.
          keepAlive: true,
          keepAliveInitialDelayMillis: 10_000,
          connectionTimeoutMillis: 5_000,
          query_timeout: LEADER_QUERY_TIMEOUT_MS,
        });
        c.on('error', (err) => {
          if (client === c) lose(err.message);
        });
        client = c;
        await c.connect();
        // And the server side: drop (and unlock) a session whose worker vanished within ~25 s. Set
        // once connected, not as startup `options`, which PgBouncer refuses ("unsupported startup
        // parameter"); behind a session pool they apply to its server connection, and PgBouncer
        // notices a vanished client with its own keepalives.
        await c.query(SERVER_KEEPALIVES);
      }
      if (!leading) {
        const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [
          WORKER_LOCK_KEY.toString(),
        ]);
        if (rows[0]?.ok) {
          leading = true;
          logger.info('worker leadership acquired');
          callbacks.onLead();
        }
      } else {
        await client.query('SELECT 1');
      }
      schedule(leading ? CHECK_MS : RETRY_MS);
    } catch (err) {
      lose((err as Error).message);
    }
  };

  void tick();
  return {
    get leading() {
      return leading;
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      if (leading) callbacks.onLose();
      leading = false;
      await client?.end().catch(() => undefined);
    },
  };
}
