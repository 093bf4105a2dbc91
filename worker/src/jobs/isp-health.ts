// Server alerts (docs/alerts.md "Server alerts"): the worker health-checks every active ISP proxy
// of accounts with server alerts on, each once per PROXYFLEET_ISP_HEALTH_INTERVAL_SECONDS, spread
// over the interval (each proxy has its own next_check_at, first set at a random point of the
// first interval). A check is a TCP connect, then one request through the proxy with its
// credentials to PROXYFLEET_ISP_HEALTH_URL. Offline after 2 consecutive failed connects; "error"
// when it connects but the proxied request fails (407, 5xx, timeout, reset); one email per
// transition (offline, error, recovered), queued in the transaction that records it.
import http from 'node:http';
import net from 'node:net';
import type { Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import { unseal } from '#common/secrets.ts';
import type { Job } from '../jobs.ts';

export const ISP_CONNECT_TIMEOUT_MS = 5_000;
export const ISP_REQUEST_TIMEOUT_MS = 10_000;
/** Checks in flight at once: a proxy that hangs holds one slot for at most the timeouts. */
export const ISP_CHECK_CONCURRENCY = 16;
/** Due proxies taken per run. */
const ISP_CHECK_BATCH = 200;
export const OFFLINE_AFTER_FAILED_CONNECTS = 2;

export type HealthState = 'unknown' | 'online' | 'offline' | 'error';

export interface IspHealthOptions {
  intervalSeconds: number;
  url: string;
  credentialsKey: Buffer;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
}

export type CheckOutcome =
  { kind: 'ok' } | { kind: 'connect-failed'; detail: string } | { kind: 'error'; detail: string };

interface DueProxy {
  id: string;
  account_id: string;
  host: string;
  port: number;
  username: string;
  password_enc: Buffer;
  state: HealthState;
  connect_failures: number;
}

export function ispHealthJob(options: IspHealthOptions): Job {
  const intervalMs = options.intervalSeconds * 1000;
  return {
    name: 'isp-health',
    // Often enough that checks spread over the interval start close to their due time.
    intervalMs: Math.max(250, Math.min(5_000, Math.floor(intervalMs / 12))),
    async run({ pool, logger }) {
      await enrol(pool, options.intervalSeconds);
      const { rows } = await pool.query<DueProxy>(
        `SELECT i.id, i.account_id, i.host, i.port, i.username, i.password_enc, h.state, h.connect_failures
           FROM isp_proxy_health h JOIN isp_proxies i ON i.id = h.proxy_id
           JOIN alert_settings s ON s.account_id = i.account_id AND s.server_alerts
          WHERE h.next_check_at <= now() AND i.status = 'active' AND (i.expires_at IS NULL OR i.expires_at > now())
          ORDER BY h.next_check_at LIMIT $1`,
        [ISP_CHECK_BATCH],
      );
      let next = 0;
      const worker = async () => {
        while (next < rows.length) {
          const proxy = rows[next++]!;
          try {
            const password = unseal(options.credentialsKey, proxy.password_enc);
            const outcome = await checkIspProxy(proxy.host, proxy.port, proxy.username, password, options);
            await record(pool, proxy, outcome, options.intervalSeconds, logger);
          } catch (err) {
            logger.warn(
              { proxy: proxy.id, err: err instanceof Error ? err.message : String(err) },
              'ISP proxy check failed to run',
            );
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(ISP_CHECK_CONCURRENCY, rows.length) }, worker));
    },
  };
}

/** Gives every checked proxy a state row, due at a random point of the first interval. */
async function enrol(pool: Pool, intervalSeconds: number): Promise<void> {
  await pool.query(
    `INSERT INTO isp_proxy_health (proxy_id, next_check_at)
     SELECT i.id, now() + random() * make_interval(secs => $1)
       FROM isp_proxies i JOIN alert_settings s ON s.account_id = i.account_id AND s.server_alerts
      WHERE i.status = 'active'
     ON CONFLICT (proxy_id) DO NOTHING`,
    [intervalSeconds],
  );
}

/** The state a check leads to, and whether that is a transition worth an email. */
export function nextState(
  previous: HealthState,
  connectFailures: number,
  outcome: CheckOutcome,
): { state: HealthState; connectFailures: number; email: 'offline' | 'error' | 'recovered' | null } {
  if (outcome.kind === 'connect-failed') {
    const failures = connectFailures + 1;
    if (failures < OFFLINE_AFTER_FAILED_CONNECTS)
      return { state: previous, connectFailures: failures, email: null };
    return { state: 'offline', connectFailures: failures, email: previous === 'offline' ? null : 'offline' };
  }
  if (outcome.kind === 'error')
    return { state: 'error', connectFailures: 0, email: previous === 'error' ? null : 'error' };
  const recovered = previous === 'offline' || previous === 'error';
  return { state: 'online', connectFailures: 0, email: recovered ? 'recovered' : null };
}

async function record(
  pool: Pool,
  proxy: DueProxy,
  outcome: CheckOutcome,
  intervalSeconds: number,
  logger: Logger,
): Promise<void> {
  const next = nextState(proxy.state, proxy.connect_failures, outcome);
  const detail = outcome.kind === 'ok' ? null : outcome.detail;
  const changed = next.state !== proxy.state;
  // One statement: the state, its history and the email commit together or not at all; the
  // state guard (h.state = $prev) makes a concurrent duplicate check a no-op.
  await pool.query(
    `WITH upd AS (
       UPDATE isp_proxy_health h SET state = $2, connect_failures = $3, detail = $4, checked_at = now(),
              changed_at = CASE WHEN $5 THEN now() ELSE h.changed_at END,
              next_check_at = now() + make_interval(secs => $6)
        WHERE h.proxy_id = $1 AND h.state = $7 RETURNING h.proxy_id
     ), hist AS (
       INSERT INTO isp_proxy_health_history (proxy_id, from_state, to_state, detail)
       SELECT $1, $7, $2, $4 FROM upd WHERE $5
     )
     SELECT email_enqueue($10, 'server_alert', $1 || ':' || gen_random_uuid(),
              jsonb_build_object('proxyId', $1::text, 'state', $8::text, 'endpoint', $9::text, 'detail', $4::text))
       FROM upd WHERE $8::text IS NOT NULL`,
    [
      proxy.id,
      next.state,
      next.connectFailures,
      detail,
      changed,
      intervalSeconds,
      proxy.state,
      next.email,
      `${proxy.host}:${proxy.port}`,
      proxy.account_id,
    ],
  );
  if (changed)
    logger.info({ proxy: proxy.id, from: proxy.state, to: next.state, detail }, 'ISP proxy health changed');
}

/** One check: TCP connect, then a request through the proxy with its credentials. */
export async function checkIspProxy(
  host: string,
  port: number,
  username: string,
  password: string,
  options: Pick<IspHealthOptions, 'url' | 'connectTimeoutMs' | 'requestTimeoutMs'>,
): Promise<CheckOutcome> {
  const connectTimeout = options.connectTimeoutMs ?? ISP_CONNECT_TIMEOUT_MS;
  const requestTimeout = options.requestTimeoutMs ?? ISP_REQUEST_TIMEOUT_MS;
  const connected = await new Promise<string | null>((resolve) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(`connect timed out after ${connectTimeout} ms`);
    }, connectTimeout);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(null);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(err.code ?? err.message);
    });
  });
  if (connected !== null) return { kind: 'connect-failed', detail: connected };

  const target = new URL(options.url);
  const auth = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  const https = target.protocol === 'https:';
  const authority = `${target.hostname}:${target.port || (https ? 443 : 80)}`;
  return new Promise<CheckOutcome>((resolve) => {
    const req = http.request({
      host,
      port,
      method: https ? 'CONNECT' : 'GET',
      path: https ? authority : target.href,
      headers: { host: target.host, 'proxy-authorization': auth },
      agent: false,
    });
    const timer = setTimeout(() => {
      req.destroy();
      resolve({ kind: 'error', detail: `no answer within ${requestTimeout} ms` });
    }, requestTimeout);
    const done = (outcome: CheckOutcome) => {
      clearTimeout(timer);
      req.destroy();
      resolve(outcome);
    };
    const judge = (status: number) =>
      status === 407
        ? done({ kind: 'error', detail: 'the proxy refused its credentials (407)' })
        : status >= 500 || (https && status !== 200)
          ? done({ kind: 'error', detail: `the proxied request failed with ${status}` })
          : done({ kind: 'ok' });
    req.once('connect', (res) => judge(res.statusCode ?? 0));
    req.once('response', (res) => {
      res.resume();
      judge(res.statusCode ?? 0);
    });
    req.once('error', (err: NodeJS.ErrnoException) =>
      done({ kind: 'error', detail: `the proxied request failed: ${err.code ?? err.message}` }),
    );
    req.end();
  });
}
