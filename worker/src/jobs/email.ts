// The email outbox sender (DESIGN decision 8, docs/adr/0006-email-outbox.md). Alerts are written to
// email_outbox in the transaction of their cause; this job claims due rows with FOR UPDATE SKIP
// LOCKED, sends each over SMTP with nodemailer and records the outcome. nodemailer never retries
// by itself (nodemailer #405, #1425), so retries live here: exponential backoff for temporary
// failures (4xx, connection refused, timeouts), at once to 'failed' for a permanent rejection (5xx).
//
// Delivery is at least once: a row is claimed by pushing its next_attempt_at one lease ahead, so a
// worker that dies between the SMTP "250 OK" and the UPDATE that marks the row sent leaves it to be
// sent again when the lease runs out. The resend carries the same Message-ID, which lets a mail
// client recognise the duplicate.
import { createTransport } from 'nodemailer';
import { Counter, type Registry } from 'prom-client';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Job } from '../jobs.ts';
import { renderEmail } from './render.ts';

export const EMAIL_SENDER_INTERVAL_MS = 5_000;
/** Rows claimed per statement; small, so one slow SMTP server holds few rows at a time. */
export const EMAIL_BATCH_SIZE = 10;
/** One run sends at most this many batches, then yields to the next run. */
export const EMAIL_MAX_BATCHES_PER_RUN = 10;
/** Attempts (temporary failures) before a row is marked failed. */
export const EMAIL_MAX_ATTEMPTS = 10;
/** Backoff after the first failed attempt; doubles per attempt up to the maximum. */
export const EMAIL_RETRY_BASE_MS = 30_000;
export const EMAIL_RETRY_MAX_MS = 60 * 60_000;
// nodemailer's own defaults are 2 min / 30 s / 10 min: too long for a batch that holds claims.
const SMTP_CONNECTION_TIMEOUT_MS = 10_000;
const SMTP_GREETING_TIMEOUT_MS = 10_000;
const SMTP_SOCKET_TIMEOUT_MS = 30_000;
/**
 * How long a claimed row stays hidden from other claimers: longer than a whole batch can take when
 * every send runs into every timeout, so a live sender never loses its claim.
 */
export const EMAIL_CLAIM_LEASE_MS =
  2 * EMAIL_BATCH_SIZE * (SMTP_CONNECTION_TIMEOUT_MS + SMTP_GREETING_TIMEOUT_MS + SMTP_SOCKET_TIMEOUT_MS);
const LAST_ERROR_MAX_CHARS = 1_000;

/** Errors that say nothing about the message but about the way to the server (or its config). */
const TRANSPORT_ERROR_CODES = new Set([
  'ECONNECTION',
  'ETIMEDOUT',
  'ESOCKET',
  'EDNS',
  'ETLS',
  'EAUTH',
  'ENOAUTH',
  'EPROXY',
]);

export type SendFailure =
  /** The server refused this message for good (5xx): retrying cannot help. */
  | 'permanent'
  /** A 4xx or a protocol hiccup with this message: retry it later. */
  | 'temporary'
  /** The server could not be reached or refused us (down, timeout, TLS, authentication): retry, and stop this run. */
  | 'transport';

export function classifySendError(err: unknown): SendFailure {
  const { code, responseCode } = (err ?? {}) as { code?: unknown; responseCode?: unknown };
  if (typeof code === 'string' && TRANSPORT_ERROR_CODES.has(code)) return 'transport';
  // Node's own socket errors (ECONNREFUSED, ECONNRESET) when nodemailer passes them through.
  if (typeof code === 'string' && code.startsWith('ECONN')) return 'transport';
  if (typeof responseCode === 'number' && responseCode >= 500 && responseCode < 600) return 'permanent';
  return 'temporary';
}

/** Delay before attempt `attempts + 1`, after `attempts` (>= 1) failed ones. */
export function retryDelayMs(
  attempts: number,
  baseMs = EMAIL_RETRY_BASE_MS,
  maxMs = EMAIL_RETRY_MAX_MS,
): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));
}

export interface EmailSenderOptions {
  /** smtp://user:pass@host:587 or smtps://... */
  smtpUrl: string;
  from: string;
  logger: Logger;
  registry?: Registry;
  /** Tests use a short name to run two senders side by side; default 'email-sender'. */
  name?: string;
}

interface OutboxRow {
  id: number;
  account_id: string | null;
  kind: string;
  to_address: string;
  /** null: rendered from payload when sent (./render.ts). */
  subject: string | null;
  body_text: string | null;
  payload: unknown;
  message_id: string;
  attempts: number;
}

export const EMAIL_OUTCOMES = ['sent', 'retry', 'failed', 'dropped'] as const;

/**
 * proxyfleet_worker_emails_total, one per registry, every outcome exported at zero from the start
 * (so a rate() or an alert on it works before the first email, and with email off).
 */
export function emailOutcomeCounter(registry: Registry): Counter<'outcome'> {
  const existing = registry.getSingleMetric('proxyfleet_worker_emails_total');
  if (existing) return existing as Counter<'outcome'>;
  const counter = new Counter({
    name: 'proxyfleet_worker_emails_total',
    help: 'Outbox emails by outcome of a send attempt (sent, retry, failed, dropped: its alert no longer held)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  for (const outcome of EMAIL_OUTCOMES) counter.inc({ outcome }, 0);
  return counter;
}

export function emailSenderJob(options: EmailSenderOptions): Job {
  // Not pooled: alerts are rare, and a plain transport holds no connection between runs, so the
  // job needs no shutdown hook.
  const transport = createTransport({
    url: options.smtpUrl,
    connectionTimeout: SMTP_CONNECTION_TIMEOUT_MS,
    greetingTimeout: SMTP_GREETING_TIMEOUT_MS,
    socketTimeout: SMTP_SOCKET_TIMEOUT_MS,
  });
  const outcomes = options.registry ? emailOutcomeCounter(options.registry) : undefined;
  const logger = options.logger;

  const claim = async (pool: Pool): Promise<OutboxRow[]> => {
    const { rows } = await pool.query<OutboxRow>(
      `UPDATE email_outbox o SET next_attempt_at = now() + make_interval(secs => $2::double precision / 1000)
         FROM (SELECT id FROM email_outbox WHERE status = 'pending' AND next_attempt_at <= now()
                ORDER BY next_attempt_at, id LIMIT $1 FOR UPDATE SKIP LOCKED) due
        WHERE o.id = due.id
        RETURNING o.id, o.account_id, o.kind, o.to_address, o.subject, o.body_text, o.payload, o.message_id, o.attempts`,
      [EMAIL_BATCH_SIZE, EMAIL_CLAIM_LEASE_MS],
    );
    return rows.sort((a, b) => a.id - b.id);
  };

  /** Records the text that was sent (rendered rows keep what the customer read). */
  const markSent = (pool: Pool, id: number, subject: string, body: string) =>
    pool.query(
      `UPDATE email_outbox SET status = 'sent', sent_at = now(), attempts = attempts + 1, last_error = NULL,
              subject = $2, body_text = $3
        WHERE id = $1 AND status = 'pending'`,
      [id, subject, body],
    );

  const markDropped = (pool: Pool, id: number, reason: string) =>
    pool.query(
      `UPDATE email_outbox SET status = 'dropped', last_error = $2 WHERE id = $1 AND status = 'pending'`,
      [id, `dropped: ${reason}`],
    );

  /** Records a failed attempt; returns the row's new status. */
  const markFailedAttempt = async (
    pool: Pool,
    row: OutboxRow,
    err: unknown,
    permanent: boolean,
  ): Promise<string> => {
    const attempts = row.attempts + 1;
    const giveUp = permanent || attempts >= EMAIL_MAX_ATTEMPTS;
    const { rows } = await pool.query<{ status: string }>(
      `UPDATE email_outbox SET attempts = attempts + 1, last_error = $2,
              status = CASE WHEN $3 THEN 'failed' ELSE 'pending' END,
              next_attempt_at = now() + make_interval(secs => $4::double precision / 1000)
        WHERE id = $1 AND status = 'pending' RETURNING status`,
      [row.id, describeError(err), giveUp, retryDelayMs(attempts)],
    );
    return rows[0]?.status ?? 'gone';
  };

  /** Rows claimed but not tried in this run (the server is down): due again with the failed one. */
  const release = (pool: Pool, rows: OutboxRow[], delayMs: number) =>
    rows.length === 0
      ? Promise.resolve()
      : pool.query(
          `UPDATE email_outbox SET next_attempt_at = now() + make_interval(secs => $2::double precision / 1000)
            WHERE id = ANY($1::bigint[]) AND status = 'pending'`,
          [rows.map((r) => r.id), delayMs],
        );

  return {
    name: options.name ?? 'email-sender',
    intervalMs: EMAIL_SENDER_INTERVAL_MS,
    async run({ pool }) {
      for (let batch = 0; batch < EMAIL_MAX_BATCHES_PER_RUN; batch++) {
        const rows = await claim(pool);
        for (const [index, row] of rows.entries()) {
          let text = { subject: row.subject ?? '', body: row.body_text ?? '' };
          try {
            if (row.subject === null || row.body_text === null) {
              const rendered = await renderEmail(pool, row.kind, row.account_id, row.payload);
              if ('drop' in rendered) {
                await markDropped(pool, row.id, rendered.drop);
                outcomes?.inc({ outcome: 'dropped' });
                logger.info(
                  { outbox: row.id, kind: row.kind, reason: rendered.drop },
                  'email dropped: its alert no longer holds',
                );
                continue;
              }
              text = rendered;
            }
            await transport.sendMail({
              from: options.from,
              to: row.to_address,
              subject: text.subject,
              text: text.body,
              messageId: row.message_id,
            });
          } catch (err) {
            const failure = classifySendError(err);
            const status = await markFailedAttempt(pool, row, err, failure === 'permanent');
            outcomes?.inc({ outcome: status === 'failed' ? 'failed' : 'retry' });
            const fields = {
              outbox: row.id,
              code: errorField(err, 'code'),
              responseCode: errorField(err, 'responseCode'),
            };
            if (status === 'failed') logger.warn(fields, 'email failed for good');
            else logger.info(fields, 'email send failed; will retry');
            if (failure === 'transport') {
              // The next rows would fail the same way: leave them for the retry of this one.
              await release(pool, rows.slice(index + 1), retryDelayMs(row.attempts + 1));
              logger.warn(
                { code: errorField(err, 'code') },
                'SMTP server unavailable; email sending paused until the next retry',
              );
              return;
            }
            continue;
          }
          await markSent(pool, row.id, text.subject, text.body);
          outcomes?.inc({ outcome: 'sent' });
        }
        if (rows.length < EMAIL_BATCH_SIZE) return;
      }
    },
  };
}

function errorField(err: unknown, field: 'code' | 'responseCode'): unknown {
  return err && typeof err === 'object' ? (err as Record<string, unknown>)[field] : undefined;
}

function describeError(err: unknown): string {
  const text =
    err instanceof Error
      ? `${(errorField(err, 'code') as string | undefined) ?? err.name}: ${err.message}`
      : String(err);
  return text.slice(0, LAST_ERROR_MAX_CHARS);
}
