// Whether a database error means "the database is not there now" (answered 503, retried later)
// rather than "this request is wrong" (400/409/500). Shared by every caller that must tell them
// apart, with a pooler in between (docs/adr/0068) as without.
import { sqlState } from './pool.ts';

/**
 * SQLSTATE class 08 (connection exception; PgBouncer reports its own failures as 08P01: "server
 * login has been failing", "query_wait_timeout", "no more connections allowed"), the server shutting
 * down or starting (57P01-57P03), too many connections (53300), and a read-only transaction (25006:
 * a standby answering while a failover has not promoted it yet).
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '25006']);
/** Node's socket errors on the connection to the database (or the pooler). */
const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH']);
/** pg and pg-pool errors without a code: a pool wait or connect timed out, a connection ended, no answer. */
const DRIVER_MESSAGES = /timeout exceeded when trying to connect|Connection terminated|Query read timeout/;

export function databaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = sqlState(err) ?? '';
  if (code.startsWith('08') || UNAVAILABLE_STATES.has(code) || SOCKET_ERRORS.has(code)) return true;
  return err instanceof Error && DRIVER_MESSAGES.test(err.message);
}
