// The low-bandwidth alert from gateway usage to the customer's inbox: usage batches folded by the
// real usage-fold job, the alert job, and the outbox sender against a real SMTP server.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { recordPurchase } from '../../../common/src/accounts/accounts.ts';
import { createLogger } from '../../../common/src/logger.ts';
import type { Product } from '../../../common/src/products.ts';
import { usageFoldJob } from './usage.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/db.ts';
import { accountWithBandwidth } from '../../../test/fixtures.ts';
import type { Job, JobContext } from '../jobs.ts';
import { emailSenderJob } from './email.ts';
import { addresses, startTestSmtpServer, type TestSmtpServer } from './email-testing.ts';
import { lowBandwidthEmail, lowBandwidthJob } from './low-bandwidth.ts';

const GB = 1e9;

describe('low-bandwidth alert', () => {
  let db: TestDatabase;
  let ctx: JobContext;
  let server: TestSmtpServer;
  let sender: Job;

  beforeAll(async () => {
    db = await createTestDatabase();
    ctx = { pool: db.pool, logger: createLogger('test', 'silent') };
    server = await startTestSmtpServer();
    sender = emailSenderJob({
      smtpUrl: server.url,
      from: 'proxyfleet <alerts@localhost>',
      logger: ctx.logger,
      registry: new Registry(),
    });
  });
  afterAll(async () => {
    await server.close();
    await db.drop();
  });

  /** A gateway reports `bytes` of traffic; the worker folds it into the balance. */
  async function use(accountId: string, product: Product, bytes: number): Promise<void> {
    const batch = await db.pool.query<{ id: number }>(
      `INSERT INTO usage_batches (idempotency_key, gateway_id) VALUES ($1, 'test-gateway') RETURNING id`,
      [randomUUID()],
    );
    await db.pool.query(
      `INSERT INTO usage_batch_lines (batch_id, account_id, product, bytes_up, bytes_down, requests) VALUES ($1, $2, $3, 0, $4, 1)`,
      [batch.rows[0]!.id, accountId, product, bytes],
    );
    await usageFoldJob.run(ctx);
  }

  const alerts = async (accountId: string) =>
    (
      await db.pool.query<{ dedupe_key: string; subject: string; status: string }>(
        `SELECT dedupe_key, subject, status FROM email_outbox WHERE account_id = $1 AND kind = 'low_bandwidth' ORDER BY id`,
        [accountId],
      )
    ).rows;
  /** Runs the alert job and the sender; returns the alert emails this account received so far. */
  async function tick(email: string): Promise<string[]> {
    await lowBandwidthJob.run(ctx);
    await sender.run(ctx);
    return server.messages
      .filter((m) => m.text?.includes('running low') && addresses(m.to).includes(email))
      .map((m) => m.subject ?? '');
  }

  it('fires once at the threshold, not again, and again after a new purchase runs low', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 10 * GB });
    await db.pool.query('UPDATE alert_settings SET low_bandwidth_percent = 20 WHERE account_id = $1', [
      account.id,
    ]);

    await use(account.id, 'basic', 7.9 * GB); // 2.1 GB left: 21 %, above the threshold
    expect(await tick(account.email)).toEqual([]);

    await use(account.id, 'basic', 0.1 * GB); // 2 GB left: exactly 20 %
    expect(await tick(account.email)).toEqual(['Low basic bandwidth: 2 GB of 10 GB left']);
    expect(await alerts(account.id)).toEqual([
      {
        dedupe_key: `low_bandwidth:${account.id}:basic:${10 * GB}`,
        subject: 'Low basic bandwidth: 2 GB of 10 GB left',
        status: 'sent',
      },
    ]);

    await use(account.id, 'basic', 1.5 * GB); // lower still: the same level, no second alert
    expect(await tick(account.email)).toHaveLength(1);

    // A purchase lifts the level to 15 GB with 5.5 GB left (37 %): quiet until it runs low again.
    await recordPurchase(db.pool, { accountId: account.id, product: 'basic', bytes: 5 * GB });
    expect(await tick(account.email)).toHaveLength(1);
    await use(account.id, 'basic', 3 * GB); // 2.5 GB of 15 GB: 16 %
    expect(await tick(account.email)).toEqual([
      'Low basic bandwidth: 2 GB of 10 GB left',
      'Low basic bandwidth: 2.5 GB of 15 GB left',
    ]);
    expect((await alerts(account.id)).map((a) => a.dedupe_key)).toEqual([
      `low_bandwidth:${account.id}:basic:${10 * GB}`,
      `low_bandwidth:${account.id}:basic:${15 * GB}`,
    ]);
  });

  it('alerts per product', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: 10 * GB, mobile: 10 * GB });
    await use(account.id, 'mobile', 9.5 * GB); // default threshold 10 %: 5 % left
    await use(account.id, 'basic', 5 * GB);
    expect(await tick(account.email)).toEqual(['Low mobile bandwidth: 0.5 GB of 10 GB left']);
  });

  it('sends nothing to an account with the alert off', async () => {
    const account = await accountWithBandwidth(db.pool, { basic: GB });
    await db.pool.query('UPDATE alert_settings SET low_bandwidth = false WHERE account_id = $1', [
      account.id,
    ]);
    await use(account.id, 'basic', GB);
    expect(await tick(account.email)).toEqual([]);
    expect(await alerts(account.id)).toEqual([]);
  });

  it('words a used-up balance (usage past the total) as used up', () => {
    expect(lowBandwidthEmail({ product: 'basic', total_bytes: GB, used_bytes: GB + 5, percent: 10 })).toEqual(
      {
        subject: 'Your basic bandwidth is used up',
        body: expect.stringContaining('0 GB of 1 GB left (0%; this alert is sent at 10%)'),
      },
    );
  });
});
