// Auto-refills paid by a method that charges first (refills.ts) go to the audit log in the
// transaction that records them, as the ones SQL buys (billing_refill): bought or failed, actor
// system "auto-refill", no secret.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { createLogger } from '../logger.ts';
import { putAutoRefill } from './auto-refill.ts';
import { paymentMethods, type ChargeResult, type PaymentMethod } from './payment.ts';
import { payPendingRefill } from './refills.ts';

/** A payment provider's stand-in: answers what the test says. */
const card = (answer: ChargeResult): PaymentMethod => ({
  name: 'card',
  settlement: 'charge',
  charge: () => Promise.resolve(answer),
});

describe('auto-refills charged first: their audit entries', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());
  const logger = createLogger('test', 'silent');

  async function pendingRefill(): Promise<string> {
    const account = await accountWithBandwidth(db.pool);
    await putAutoRefill(
      db.pool,
      account.id,
      'basic',
      { enabled: true, thresholdGb: 1, refillGb: 2, maxRefillsPerMonth: 3 },
      'card',
    );
    const { rows } = await db.pool.query<{ outcome: string }>(
      `SELECT billing_refill($1, 'basic', 1, 0) AS outcome`,
      [account.id],
    );
    expect(rows[0]!.outcome).toBe('pending');
    return account.id;
  }
  const entries = async (accountId: string) =>
    (
      await db.pool.query(
        `SELECT actor_kind, actor_id, actor_ip, action, target_type, details FROM audit_log
          WHERE account_id = $1 AND action LIKE 'auto_refill.%' ORDER BY id`,
        [accountId],
      )
    ).rows;

  it('a paid refill: auto_refill.bought with its invoice', async () => {
    const accountId = await pendingRefill();
    expect(await payPendingRefill(db.pool, paymentMethods(card({ ok: true })), logger)).toBe(true);
    const { rows: invoices } = await db.pool.query<{ id: string; number: number }>(
      `SELECT i.id, i.number FROM invoices i JOIN purchases p ON p.id = i.purchase_id
        WHERE i.account_id = $1 AND p.source = 'auto_refill'`,
      [accountId],
    );
    expect(invoices).toHaveLength(1);
    expect(await entries(accountId)).toEqual([
      {
        actor_kind: 'system',
        actor_id: 'auto-refill',
        actor_ip: null,
        action: 'auto_refill.bought',
        target_type: 'invoice',
        details: expect.objectContaining({
          product: 'basic',
          bytes: 2_000_000_000,
          invoiceNumber: invoices[0]!.number,
          paymentMethod: 'card',
        }),
      },
    ]);
  });

  it('a refused charge: auto_refill.failed with the reason, nothing bought', async () => {
    const accountId = await pendingRefill();
    const declined = card({ ok: false, reason: 'card declined' });
    expect(await payPendingRefill(db.pool, paymentMethods(declined), logger)).toBe(true);
    expect(await entries(accountId)).toEqual([
      {
        actor_kind: 'system',
        actor_id: 'auto-refill',
        actor_ip: null,
        action: 'auto_refill.failed',
        target_type: 'auto_refill',
        details: { product: 'basic', bytes: 2_000_000_000, paymentMethod: 'card', reason: 'card declined' },
      },
    ]);
  });
});
