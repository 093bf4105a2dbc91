// Paying by card on the Billing page in a real Chromium, against the real API, database and
// stripe-mock (test/stripe.ts): the card is saved on Stripe's hosted page (stubbed at the redirect:
// the browser is sent back as Stripe would send it) and by Stripe's webhook, never by the
// redirect; "Pay by card" starts the payment and buys nothing; the success webhook buys, and the
// page shows the bandwidth and the paid invoice. Without a Stripe key the page says purchases are
// billed by invoice.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import {
  adminCall,
  axe,
  describeInChromium,
  signInThroughInvite,
  startDashboardRun,
  tableCells,
  type DashboardRun,
} from '#test/dashboard.ts';
import { exampleEmail } from '#test/fixtures.ts';
import { deliver, intentIdOf, signedEvent, useStripe } from '#test/stripe.ts';

jest.setTimeout(180_000);

const stripe = useStripe();
let run: DashboardRun;
let page: Page;
let account: { id: string; email: string; apiKey: string };

describeInChromium('customer dashboard in Chromium: paying by card on the Billing page', () => {
  beforeAll(async () => {
    run = await startDashboardRun(stripe.env);
    page = run.page;
    account = (await adminCall(run.api, '/accounts', { body: { email: exampleEmail('card') } }))
      .body as typeof account;
    await signInThroughInvite(run, account);
    // Stripe's hosted pages are not reached: Checkout sends the customer back to the success URL.
    await page.route('https://checkout.stripe.com/**', (route) =>
      route.fulfill({ status: 303, headers: { location: `${run.api.url}/billing?done=card-saved` } }),
    );
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  it('saves a card by webhook, pays by card, and shows the bandwidth once the payment succeeded', async () => {
    await page.goto('/billing');
    const card = page.getByRole('region', { name: 'Card' });
    expect(await card.textContent()).toContain('No card is saved.');
    await card.getByRole('button', { name: 'Save a card' }).click();
    await page.getByRole('link', { name: 'Continue to Stripe' }).click();
    await page.waitForURL(`${run.api.url}/billing?done=card-saved`);
    // Back from Stripe: still no card until Stripe's webhook says so.
    expect(await page.getByRole('region', { name: 'Card' }).textContent()).toContain('No card is saved.');
    const { rows } = await run.db.pool.query<{ customer_id: string }>(
      'SELECT customer_id FROM stripe_customers WHERE account_id = $1',
      [account.id],
    );
    const saved = await deliver(
      run.api.url,
      signedEvent('setup_intent.succeeded', {
        id: 'seti_1',
        object: 'setup_intent',
        customer: rows[0]!.customer_id,
        payment_method: 'pm_card_visa',
        status: 'succeeded',
      }),
    );
    expect(saved.body.outcome).toBe('applied');
    await page.goto('/billing');
    expect(await page.getByRole('region', { name: 'Card' }).textContent()).toContain('Saved card:');

    const buy = page.getByRole('region', { name: 'Buy bandwidth' });
    await buy.getByLabel('Product').selectOption('basic');
    await buy.getByLabel('Bandwidth (GB)').fill('2');
    await buy.getByRole('button', { name: /^Pay by card/ }).click();
    await page.waitForURL(`${run.api.url}/billing?done=card-waiting`);
    expect(await page.getByRole('region', { name: 'Card' }).textContent()).toContain(
      'waiting for the card payment',
    );
    const before = await tableCells(page, 'Auto-refill settings');
    expect(before.find((r) => r[0] === 'basic')?.[1]).toBe('0 GB');

    const payment = await run.db.pool.query<{ id: string; amount_cents: string }>(
      'SELECT id, amount_cents FROM card_payments WHERE account_id = $1',
      [account.id],
    );
    const { id, amount_cents } = payment.rows[0]!;
    const paid = await deliver(
      run.api.url,
      signedEvent('payment_intent.succeeded', {
        id: intentIdOf(id),
        object: 'payment_intent',
        amount: Number(amount_cents),
        amount_received: Number(amount_cents),
        currency: 'usd',
        status: 'succeeded',
        metadata: { card_payment_id: id, kind: 'purchase' },
      }),
    );
    expect(paid.body.outcome).toBe('applied');
    await page.goto('/billing');
    const after = await tableCells(page, 'Auto-refill settings');
    expect(after.find((r) => r[0] === 'basic')?.[1]).toBe('2 GB');
    const invoices = await tableCells(page, 'Invoices');
    expect(invoices[0]!.slice(2, 7)).toEqual([
      'basic',
      '2 GB',
      'Purchase',
      expect.stringMatching(/^paid on /),
      '4.00 USD',
    ]);
    await axe(page, 'billing with a saved card');
  });
  it('shows a card payment that failed at the bank, with its reason, and buys nothing', async () => {
    await page.goto('/billing');
    const buy = page.getByRole('region', { name: 'Buy bandwidth' });
    await buy.getByLabel('Product').selectOption('light');
    await buy.getByLabel('Bandwidth (GB)').fill('1');
    await buy.getByRole('button', { name: /^Pay by card/ }).click();
    await page.waitForURL(`${run.api.url}/billing?done=card-waiting`);
    const { rows } = await run.db.pool.query<{ id: string; amount_cents: string }>(
      `SELECT id, amount_cents FROM card_payments WHERE account_id = $1 AND product = 'light'`,
      [account.id],
    );
    const { id, amount_cents } = rows[0]!;
    // The bank refused the confirmation: Stripe says payment_failed, with the reason.
    const failed = await deliver(
      run.api.url,
      signedEvent('payment_intent.payment_failed', {
        id: intentIdOf(id),
        object: 'payment_intent',
        amount: Number(amount_cents),
        amount_received: 0,
        currency: 'usd',
        status: 'requires_payment_method',
        last_payment_error: { message: 'Your card was declined.' },
        metadata: { card_payment_id: id, kind: 'purchase' },
      }),
    );
    expect(failed.body.outcome).toBe('applied');
    // Before, the page said nothing: the payment left "waiting" and appeared nowhere.
    await page.goto('/billing');
    const card = page.getByRole('region', { name: 'Card' });
    expect(await card.textContent()).not.toContain('waiting for the card payment');
    const item = card.getByRole('listitem').filter({ hasText: 'light' });
    expect(await item.textContent()).toMatch(
      /1 GB light, \d+\.\d\d USD, \d{4}-\d\d-\d\d:\s+Your card was declined\./,
    );
    const after = await tableCells(page, 'Auto-refill settings');
    expect(after.find((r) => r[0] === 'light')?.[1]).toBe('0 GB');
    await axe(page, 'billing with a failed card payment');
  });
});
