// The outbox sender against a real SMTP server (smtp-server) and real PostgreSQL: what arrives,
// permanent and temporary rejections, an SMTP server that is down and then up, and two senders
// claiming the same outbox at once.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { ParsedMail } from 'mailparser';
import { Registry } from 'prom-client';
import { recordPurchase } from '#common/billing/purchases.ts';
import { createLogger } from '#common/logger.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import type { JobContext } from '../jobs.ts';
import { EMAIL_BATCH_SIZE, EMAIL_MAX_ATTEMPTS, EMAIL_RETRY_BASE_MS, emailSenderJob } from './email.ts';
import { addresses, startTestSmtpServer, type TestSmtpServer } from '#test/smtp.ts';

const FROM = 'proxyfleet alerts <alerts@proxyfleet.test>';
const GB = 1e9;

interface Row {
  id: number;
  to_address: string;
  subject: string;
  body_text: string;
  message_id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  sent_at: Date | null;
  /** Seconds until next_attempt_at. */
  due_in: number;
}

describe('email outbox sender', () => {
  let db: TestDatabase;
  let ctx: JobContext;
  const servers: TestSmtpServer[] = [];
  const smtp = async (options?: Parameters<typeof startTestSmtpServer>[0]) => {
    const server = await startTestSmtpServer(options);
    servers.push(server);
    return server;
  };
  const sender = (url: string, name?: string) =>
    emailSenderJob({
      smtpUrl: url,
      from: FROM,
      logger: ctx.logger,
      registry: new Registry(),
      ...(name ? { name } : {}),
    });
  const rows = async (accountId: string) =>
    (
      await db.pool.query<Row>(
        `SELECT id, to_address, subject, body_text, message_id, status, attempts, last_error, sent_at,
                extract(epoch FROM next_attempt_at - now())::float8 AS due_in
           FROM email_outbox WHERE account_id = $1 ORDER BY id`,
        [accountId],
      )
    ).rows;
  /** Time passes: every pending row is due now. */
  const makeDue = () =>
    db.pool.query(`UPDATE email_outbox SET next_attempt_at = now() WHERE status = 'pending'`);

  beforeAll(async () => {
    db = await createTestDatabase();
    ctx = { pool: db.pool, logger: createLogger('test', 'silent') };
  });
  beforeEach(async () => {
    // Each test sees only its own outbox rows: the sender sends everything that is due.
    await db.pool.query('DELETE FROM email_outbox');
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    await db.drop();
  });

  it('delivers the new-invoice email, priced, with the stored To and Message-ID, and keeps the text it sent', async () => {
    const server = await smtp();
    const account = await accountWithBandwidth(db.pool, { basic: 10 * GB });
    const [queued] = await rows(account.id);
    expect(queued).toMatchObject({ status: 'pending', attempts: 0, to_address: account.email });

    await sender(server.url).run(ctx);

    expect(server.messages).toHaveLength(1);
    const mail = server.messages[0]!;
    expect(addresses(mail.to)).toEqual([account.email]);
    expect(addresses(mail.from)).toEqual(['alerts@proxyfleet.test']);
    // Queued with its cause only; rendered when sent, and the sent text is kept.
    expect(queued!.subject).toBeNull();
    expect(mail.subject).toMatch(/^Invoice #\d+: 10 GB of basic bandwidth$/);
    expect(mail.text).toMatch(
      /^Invoice #\d+ was issued for 10 GB of basic bandwidth: 20\.00 USD\.\nThe bandwidth is available now\./,
    );
    expect(mail.messageId).toBe(queued!.message_id);
    const [sent] = await rows(account.id);
    expect(sent).toMatchObject({ status: 'sent', attempts: 1, last_error: null, subject: mail.subject });
    expect(sent!.body_text.trim()).toBe(mail.text?.trim());
    expect(sent!.sent_at).toBeInstanceOf(Date);

    // Sent rows are not sent again.
    await makeDue();
    await sender(server.url).run(ctx);
    expect(server.messages).toHaveLength(1);
  });

  it('fails a row at once when the server rejects the recipient for good (550)', async () => {
    const server = await smtp();
    const account = await accountWithBandwidth(db.pool);
    server.reject.set(account.email, 550);
    await recordPurchase(db.pool, { accountId: account.id, product: 'basic', bytes: GB });

    await sender(server.url).run(ctx);

    const [row] = await rows(account.id);
    expect(row).toMatchObject({ status: 'failed', attempts: 1, sent_at: null });
    expect(row!.last_error).toMatch(/550/);
    server.reject.delete(account.email);
    await makeDue();
    await sender(server.url).run(ctx);
    expect(server.messages).toHaveLength(0);
    expect((await rows(account.id))[0]).toMatchObject({ status: 'failed', attempts: 1 });
  });

  it('retries a temporary rejection (451) after the backoff, then delivers it', async () => {
    const server = await smtp();
    const account = await accountWithBandwidth(db.pool);
    server.reject.set(account.email, 451);
    await recordPurchase(db.pool, { accountId: account.id, product: 'mobile', bytes: 2 * GB });

    await sender(server.url).run(ctx);
    const [retry] = await rows(account.id);
    expect(retry).toMatchObject({ status: 'pending', attempts: 1 });
    expect(retry!.last_error).toMatch(/451/);
    // Due again after the first backoff step (measured by the database clock on both sides).
    expect(retry!.due_in).toBeGreaterThan(EMAIL_RETRY_BASE_MS / 1000 - 10);
    expect(retry!.due_in).toBeLessThanOrEqual(EMAIL_RETRY_BASE_MS / 1000);

    server.reject.delete(account.email);
    await sender(server.url).run(ctx);
    expect(server.messages).toHaveLength(0); // not due yet

    await makeDue();
    await sender(server.url).run(ctx);
    expect(server.messages).toHaveLength(1);
    expect(server.messages[0]!.messageId).toBe(retry!.message_id);
    expect((await rows(account.id))[0]).toMatchObject({ status: 'sent', attempts: 2, last_error: null });
  });

  it('marks a row failed when temporary failures reach the maximum number of attempts', async () => {
    const server = await smtp();
    const account = await accountWithBandwidth(db.pool);
    server.reject.set(account.email, 451);
    await recordPurchase(db.pool, { accountId: account.id, product: 'basic', bytes: GB });
    await db.pool.query('UPDATE email_outbox SET attempts = $2 WHERE account_id = $1', [
      account.id,
      EMAIL_MAX_ATTEMPTS - 1,
    ]);

    await sender(server.url).run(ctx);

    const [row] = await rows(account.id);
    expect(row).toMatchObject({ status: 'failed', attempts: EMAIL_MAX_ATTEMPTS });
    expect(row!.last_error).toMatch(/451/);
  });

  it('keeps rows while the SMTP server is down and delivers them once it is up', async () => {
    const gone = await startTestSmtpServer();
    const port = gone.port;
    await gone.close();
    const account = await accountWithBandwidth(db.pool, { basic: GB, advanced: GB });
    const job = sender(gone.url);

    await job.run(ctx);

    const [first, second] = await rows(account.id);
    expect(first).toMatchObject({ status: 'pending', attempts: 1 });
    expect(first!.last_error).toMatch(/ECONNREFUSED|ESOCKET|ECONNECTION/);
    expect(first!.due_in).toBeGreaterThan(0);
    // The second row was not tried against a server known to be down, and waits as long.
    expect(second).toMatchObject({ status: 'pending', attempts: 0 });
    expect(second!.due_in).toBeGreaterThan(0);

    const server = await smtp({ port });
    await makeDue();
    await job.run(ctx);

    expect(server.messages.map((m) => m.messageId).sort()).toEqual(
      [first!.message_id, second!.message_id].sort(),
    );
    expect((await rows(account.id)).map((r) => r.status)).toEqual(['sent', 'sent']);
  });

  it('sends each row exactly once when two senders claim the outbox at the same time', async () => {
    // Slow DATA replies keep both senders mid-batch at once.
    const server = await smtp({ dataDelayMs: 5 });
    const account = await accountWithBandwidth(db.pool);
    const count = 3 * EMAIL_BATCH_SIZE + 1;
    for (let i = 0; i < count; i++) {
      await recordPurchase(db.pool, { accountId: account.id, product: 'light', bytes: (i + 1) * GB });
    }
    const a = sender(server.url, 'email-sender-a');
    const b = sender(server.url, 'email-sender-b');

    await Promise.all([a.run(ctx), b.run(ctx)]);

    const queued = await rows(account.id);
    expect(queued).toHaveLength(count);
    const received = server.messages.map((m: ParsedMail) => m.messageId);
    expect(received).toHaveLength(count);
    expect(new Set(received)).toEqual(new Set(queued.map((r) => r.message_id)));
    expect(queued.every((r) => r.status === 'sent' && r.attempts === 1)).toBe(true);
  });
});
