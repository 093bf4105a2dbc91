-- Records that the renewal of period p_period failed (docs/adr/0081): the payment was refused,
-- the credit limit would be exceeded, or the account is suspended. The subscription turns
-- past_due (the paid time ends; ISP proxies stay listed until it expires) and is tried again
-- after p_retry until p_grace after the due time; the first failure of a period queues the "payment failed" email. Each
-- attempt is audited (subscription.renewal_failed, actor system 'renewals').
CREATE OR REPLACE FUNCTION subscription_renewal_failed(p_sub uuid, p_period integer, p_reason text, p_retry interval,
                                                       p_grace interval)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  s subscriptions%ROWTYPE;
  v_price record;
  v_renewal uuid;
  v_first boolean;
BEGIN
  SELECT * INTO s FROM subscriptions WHERE id = p_sub;
  IF s.id IS NULL OR s.periods_paid <> p_period THEN
    RETURN;
  END IF;
  SELECT * INTO v_price FROM subscription_price(s.kind, s.country, s.proxy_count, s.product, s.gb_per_period);
  INSERT INTO subscription_renewals (subscription_id, account_id, period, period_start, period_end, status,
                                     amount_cents, currency, error, created_at, decided_at)
  VALUES (p_sub, s.account_id, p_period, subscription_period_start(s.started_at, p_period),
          subscription_period_start(s.started_at, p_period + 1), 'failed', v_price.cents, v_price.currency,
          left(p_reason, 500), billing_now(), billing_now())
  ON CONFLICT (subscription_id, period) DO UPDATE SET error = EXCLUDED.error, attempts = subscription_renewals.attempts + 1,
     decided_at = EXCLUDED.decided_at
   WHERE subscription_renewals.status = 'failed'
  RETURNING id, (xmax = 0) INTO v_renewal, v_first;
  IF v_renewal IS NULL THEN
    RETURN;
  END IF;
  UPDATE subscriptions SET status = 'past_due', past_due_since = coalesce(past_due_since, billing_now()),
         grace_ends_at = coalesce(grace_ends_at, next_renewal_at + p_grace),
         last_error = left(p_reason, 500), next_attempt_at = billing_now() + p_retry, updated_at = now()
   WHERE id = p_sub;
  PERFORM audit_record(s.account_id, 'system', 'renewals', NULL, 'subscription.renewal_failed', 'subscription',
                       p_sub::text, jsonb_build_object('period', p_period, 'reason', left(p_reason, 500),
                                                      'amountCents', v_price.cents, 'retry', NOT v_first));
  IF v_first THEN
    PERFORM email_enqueue(s.account_id, 'subscription_past_due', v_renewal::text, jsonb_build_object('renewalId', v_renewal));
  END IF;
END $$;
