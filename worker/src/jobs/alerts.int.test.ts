// The low-bandwidth alert on remaining = bought - used (docs/alerts.md): once per crossing, never
// for leases alone, stated at send time as GET /api/v1/usage states it, "used up" only at <= 0,
// re-armed by anything that lifts remaining above the threshold, never lost; sent through a real
// SMTP server.
import { beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { recordPurchase } from '#common/billing/purchases.ts';
import { useJobContext } from '#test/worker.ts';
import { accountWithBandwidth, accountWithAutoRefill } from '#test/fixtures.ts';
import { foldAll, SimGateway } from '#test/billing.ts';
import { addresses } from '#test/smtp.ts';
import type { Job } from '../jobs.ts';
import { balanceSweepJob } from './auto-refill.ts';
import { emailSenderJob } from './email.ts';

const MB = 1e6;
const GB = 1e9;

const fx = useJobContext();
let sender: Job;

beforeAll(() => {
  sender = emailSenderJob({
    smtpUrl: fx.smtp.url,
    from: 'proxyfleet <alerts@localhost>',
    logger: fx.ctx.logger,
    registry: new Registry(),
  });
});
beforeEach(() => {
  fx.smtp.messages.length = 0;
});

const outbox = async (accountId: string) =>
  (
    await fx.db.pool.query<{ status: string; last_error: string | null }>(
      `SELECT status, last_error FROM email_outbox WHERE account_id = $1 AND kind = 'low_bandwidth' ORDER BY id`,
      [accountId],
    )
  ).rows;
const mails = (email: string) =>
  fx.smtp.messages.filter(
    (m) => addresses(m.to).includes(email) && /^Low |bandwidth is used up$/.test(m.subject ?? ''),
  );
/** Remaining as GET /api/v1/usage computes it (its snapshot: total - used, never negative). */
async function remaining(accountId: string): Promise<number> {
  const { rows } = await fx.db.pool.query<{ r: number }>(
    `SELECT greatest(0, total_bytes - billing_used(used_bytes, reported_used_bytes)) AS r
       FROM balances WHERE account_id = $1 AND product = 'basic'`,
    [accountId],
  );
  return rows[0]!.r;
}
/** Relays `bytes` through a simulated gateway, flushed and folded: used grows by exactly that. */
async function use(gw: SimGateway, bytes: number) {
  expect(await gw.relay(bytes, 8 * MB)).toBe(bytes);
  await gw.flush(true);
  await foldAll(fx.db.pool);
}

describe('low bandwidth', () => {
  it('one email per crossing, stating remaining as the API does; none for leases alone; re-armed by a purchase', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 500 * MB });
    const gw = new SimGateway(fx.db.pool, 'gw', account.id);
    // Leases holding nearly everything are not use: no alert.
    while ((await gw.draw(100 * MB)).granted > 0);
    expect(await outbox(account.id)).toEqual([]);
    await gw.flush(true);
    // 10 %: at 50 MB left.
    await use(gw, 440 * MB);
    expect(await outbox(account.id)).toEqual([]);
    await use(gw, 15 * MB);
    expect(await outbox(account.id)).toHaveLength(1);
    await sender.run(fx.ctx);
    const left = `${(await remaining(account.id)) / GB} GB`;
    expect(left).toBe('0.045 GB');
    const [mail] = mails(account.email);
    expect(mail?.subject).toBe(`Low basic bandwidth: ${left} of 0.5 GB left`);
    expect(mail?.text).toContain(`running low: ${left} of 0.5 GB left (9%; this alert is sent at 10%)`);
    expect(mail?.text).toContain('turn on auto-refill');
    // No second email while it stays low; a purchase lifting it above re-arms it.
    await use(gw, 5 * MB);
    expect(await outbox(account.id)).toHaveLength(1);
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'basic', bytes: 1 * GB });
    await use(gw, 800 * MB); // 240 MB of 1,500 MB left: above 10 %
    expect(await outbox(account.id)).toHaveLength(1);
    await use(gw, 100 * MB);
    expect(await outbox(account.id)).toHaveLength(2);
  });

  it('drops an alert that a purchase made untrue before it was sent; the next crossing sends again', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 10 * MB });
    const gw = new SimGateway(fx.db.pool, 'gw', account.id);
    await use(gw, 9.5 * MB);
    expect(await outbox(account.id)).toMatchObject([{ status: 'pending' }]);
    await recordPurchase(fx.db.pool, { accountId: account.id, product: 'basic', bytes: 1 * GB });
    await sender.run(fx.ctx);
    expect(mails(account.email)).toEqual([]);
    expect(await outbox(account.id)).toMatchObject([
      { status: 'dropped', last_error: 'dropped: bandwidth no longer low' },
    ]);
    await use(gw, 910 * MB);
    expect(await outbox(account.id)).toMatchObject([{ status: 'dropped' }, { status: 'pending' }]);
  });

  it('re-armed when a lower percent lifts remaining above the threshold, fired by the sweep when a higher one puts it below', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 100 * MB });
    const gw = new SimGateway(fx.db.pool, 'gw', account.id);
    await use(gw, 85 * MB);
    expect(await outbox(account.id)).toEqual([]);
    await fx.db.pool.query('UPDATE alert_settings SET low_bandwidth_percent = 20 WHERE account_id = $1', [
      account.id,
    ]);
    await balanceSweepJob.run(fx.ctx);
    expect(await outbox(account.id)).toHaveLength(1);
    await fx.db.pool.query('UPDATE alert_settings SET low_bandwidth_percent = 5 WHERE account_id = $1', [
      account.id,
    ]);
    await sender.run(fx.ctx);
    expect(await outbox(account.id)).toMatchObject([{ status: 'dropped' }]);
    await use(gw, 11 * MB);
    expect(await outbox(account.id)).toHaveLength(2);
  });

  it('a floor alerts a large balance before its percent does', async () => {
    const account = await accountWithBandwidth(fx.db.pool, { basic: 1 * GB });
    await fx.db.pool.query('UPDATE alert_settings SET low_bandwidth_floor_bytes = $2 WHERE account_id = $1', [
      account.id,
      200 * MB,
    ]);
    const gw = new SimGateway(fx.db.pool, 'gw', account.id);
    await use(gw, 790 * MB);
    expect(await outbox(account.id)).toEqual([]);
    await use(gw, 20 * MB);
    expect(await outbox(account.id)).toHaveLength(1);
    await sender.run(fx.ctx);
    expect(mails(account.email)[0]?.text).toContain('(19%; this alert is sent at 10% or 0.2 GB)');
  });

  it('"used up" only when nothing remains; no promise of auto-refill past its monthly cap', async () => {
    const account = await accountWithAutoRefill(fx.db.pool, 10 * MB, {
      thresholdGb: 0.0005,
      refillGb: 0.002,
      maxRefillsPerMonth: 1,
    });
    const gw = new SimGateway(fx.db.pool, 'gw', account.id);
    await use(gw, 9.2 * MB);
    await sender.run(fx.ctx);
    const low = mails(account.email);
    expect(low.map((m) => m.subject)).toEqual(['Low basic bandwidth: 0.0008 GB of 0.01 GB left']);
    expect(low[0]!.text).toContain('Auto-refill is on: it buys 0.002 GB when less than 0.0005 GB is left');
    // The refill (its one for the month) lifts it to 12 MB; then everything is used.
    expect(await gw.relay(3 * MB, MB)).toBe(2.8 * MB);
    await gw.flush(true);
    await foldAll(fx.db.pool);
    await sender.run(fx.ctx);
    const usedUp = mails(account.email).filter((m) => m.subject === 'Your basic bandwidth is used up');
    expect(usedUp).toHaveLength(1);
    expect(usedUp[0]!.text).toContain('is used up: 0 GB of 0.012 GB left');
    expect(usedUp[0]!.text).not.toMatch(/auto-refill/i);
  });

  it('never alerts a product without a purchase', async () => {
    const account = await accountWithBandwidth(fx.db.pool);
    expect((await new SimGateway(fx.db.pool, 'gw', account.id).draw(MB)).granted).toBe(0);
    await balanceSweepJob.run(fx.ctx);
    expect(await outbox(account.id)).toEqual([]);
  });
});
