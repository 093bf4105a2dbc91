-- Ends a subscription (docs/adr/0081): its paid time is over and it will not renew (renewal
-- turned off, or the grace period of a failed renewal passed). ISP proxies of the rental stay
-- listed with status 'expired'; a plan adds no more GB (what was bought stays). Queues the
-- "subscription expired" email, once per subscription and period, and the audit entry (subscription.expired).
CREATE OR REPLACE FUNCTION subscription_expire(p_sub uuid, p_reason text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  s subscriptions%ROWTYPE;
BEGIN
  UPDATE subscriptions SET status = 'expired', last_error = coalesce(p_reason, last_error), next_attempt_at = NULL,
         updated_at = now()
   WHERE id = p_sub AND status IN ('active', 'past_due')
  RETURNING * INTO s;
  IF s.id IS NULL THEN
    RETURN false;
  END IF;
  UPDATE isp_proxies SET status = 'expired' WHERE subscription_id = p_sub AND status = 'active';
  PERFORM audit_record(s.account_id, 'system', 'renewals', NULL, 'subscription.expired', 'subscription', p_sub::text,
                       jsonb_build_object('paidUntil', s.paid_until, 'reason', p_reason));
  PERFORM email_enqueue(s.account_id, 'subscription_expired', p_sub || ':' || s.periods_paid,
                        jsonb_build_object('subscriptionId', p_sub));
  RETURN true;
END $$;
