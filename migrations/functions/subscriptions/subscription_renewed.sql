-- Records the paid renewal of a subscription's period p_period (docs/adr/0080), in the caller's
-- transaction, which holds the subscription row lock and has paid (charge.ts): the renewal row
-- (unique per subscription and period: a second call for the period returns NULL and changes
-- nothing), the invoice (source 'renewal'), the plan's GB (a purchase with source 'renewal': its
-- GB add to what remains, unused GB roll over), the new-invoice email when that alert is on, and
-- the next period, and the audit entry (subscription.renewed, actor system 'renewals'). Returns the
-- invoice id.
CREATE OR REPLACE FUNCTION subscription_renewed(p_sub uuid, p_period integer, p_settlement text, p_method text)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  s subscriptions%ROWTYPE;
  v_start timestamptz;
  v_end timestamptz;
  v_price record;
  v_invoice uuid;
  v_renewal uuid;
  v_new_invoice boolean;
BEGIN
  SELECT * INTO s FROM subscriptions WHERE id = p_sub;
  IF s.id IS NULL OR s.periods_paid <> p_period THEN
    RETURN NULL;
  END IF;
  v_start := subscription_period_start(s.started_at, p_period);
  v_end := subscription_period_start(s.started_at, p_period + 1);
  SELECT * INTO v_price FROM subscription_price(s.kind, s.country, s.proxy_count, s.product, s.gb_per_period);
  INSERT INTO subscription_renewals (subscription_id, account_id, period, period_start, period_end, status,
                                     amount_cents, currency, created_at, decided_at)
  VALUES (p_sub, s.account_id, p_period, v_start, v_end, 'paid', v_price.cents, v_price.currency, billing_now(), billing_now())
  ON CONFLICT (subscription_id, period) DO UPDATE SET status = 'paid', error = NULL, attempts = subscription_renewals.attempts + 1,
     amount_cents = EXCLUDED.amount_cents, currency = EXCLUDED.currency, decided_at = EXCLUDED.decided_at
   WHERE subscription_renewals.status = 'failed'
  RETURNING id INTO v_renewal;
  IF v_renewal IS NULL THEN
    RETURN NULL;
  END IF;
  IF s.kind = 'bandwidth_plan' THEN
    SELECT i.id INTO v_invoice
      FROM purchase_record(s.account_id, s.product, s.gb_per_period::bigint * 1000000000, 'renewal',
                           'subscription:' || p_sub || ':period:' || p_period, p_settlement, p_method) i;
    UPDATE invoices SET subscription_id = p_sub, amount_cents = v_price.cents, currency = v_price.currency,
           description = s.gb_per_period || ' GB ' || s.product || ' plan, ' || to_char(v_start AT TIME ZONE 'UTC', 'YYYY-MM-DD')
                         || ' to ' || to_char(v_end AT TIME ZONE 'UTC', 'YYYY-MM-DD')
     WHERE id = v_invoice;
  ELSE
    IF p_settlement = 'deferred' THEN
      PERFORM billing_credit_lock(s.account_id);
    END IF;
    INSERT INTO invoices (account_id, subscription_id, amount_cents, currency, settlement, payment_method, issued_at, description)
    VALUES (s.account_id, p_sub, v_price.cents, v_price.currency, p_settlement, p_method, billing_now(),
            s.proxy_count || ' ISP ' || CASE WHEN s.proxy_count = 1 THEN 'proxy' ELSE 'proxies' END || ' (' || upper(s.country) || '), '
            || to_char(v_start AT TIME ZONE 'UTC', 'YYYY-MM-DD') || ' to ' || to_char(v_end AT TIME ZONE 'UTC', 'YYYY-MM-DD'))
    RETURNING id INTO v_invoice;
    SELECT a.new_invoice INTO v_new_invoice FROM alert_settings a WHERE a.account_id = s.account_id;
    IF v_new_invoice IS DISTINCT FROM false THEN
      PERFORM email_enqueue(s.account_id, 'new_invoice', v_invoice::text, jsonb_build_object('invoiceId', v_invoice));
    END IF;
    UPDATE isp_proxies SET status = 'active' WHERE subscription_id = p_sub AND status = 'expired';
  END IF;
  UPDATE subscription_renewals SET invoice_id = v_invoice WHERE id = v_renewal;
  PERFORM audit_record(s.account_id, 'system', 'renewals', NULL, 'subscription.renewed', 'subscription', p_sub::text,
                       jsonb_build_object('period', p_period, 'periodStart', v_start, 'periodEnd', v_end,
                                          'invoiceId', v_invoice, 'amountCents', v_price.cents, 'currency', v_price.currency,
                                          'paymentMethod', p_method));
  UPDATE subscriptions SET periods_paid = p_period + 1, paid_until = v_end, next_renewal_at = v_end,
         status = 'active', past_due_since = NULL, grace_ends_at = NULL, last_error = NULL, next_attempt_at = NULL, updated_at = now()
   WHERE id = p_sub;
  RETURN v_invoice;
END $$;
