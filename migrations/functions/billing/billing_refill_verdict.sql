-- Whether an auto-refill of the product may be bought now (docs/api.md "Auto-refill"), as the
-- decision (billing_refill), the sweep, the "used up" email and the API read it: auto-refill on,
-- fewer than max_refills_per_month refills (pending or bought) this calendar month (UTC), and for
-- a bill-later method ("invoice") the refill's price within the month's credit limit. reason says
-- why not ('off', 'monthly_cap', 'credit_limit'); NULL when allowed.
CREATE OR REPLACE FUNCTION billing_refill_verdict(p_account uuid, p_product text)
RETURNS TABLE (enabled boolean, allowed boolean, reason text, threshold_bytes bigint, refill_bytes bigint,
               payment_method text, price_cents bigint, currency text, refills_this_month integer,
               max_refills_per_month integer, credit_limit_cents bigint, credit_used_cents bigint)
LANGUAGE sql STABLE AS $$
  WITH r AS (
    SELECT s.enabled, s.threshold_bytes, s.refill_bytes, s.max_refills_per_month, s.payment_method
      FROM auto_refill_settings s WHERE s.account_id = p_account AND s.product = p_product
  ), m AS (
    SELECT count(*)::integer AS n FROM auto_refills x
     WHERE x.account_id = p_account AND x.product = p_product AND x.status IN ('pending', 'succeeded')
       AND x.created_at >= billing_month_start(billing_now())
  ), v AS (
    SELECT coalesce(r.enabled, false) AS enabled, r.threshold_bytes, r.refill_bytes,
           coalesce(r.max_refills_per_month, 5) AS max_per_month, coalesce(r.payment_method, 'invoice') AS method,
           m.n, p.cents, c.limit_cents, c.used_cents, c.currency,
           coalesce(r.payment_method, 'invoice') = 'invoice'
             AND billing_credit_reason(c.limit_cents, c.used_cents, p.cents, c.currency) IS NOT NULL AS over
      FROM m CROSS JOIN credit_status(p_account) c
      LEFT JOIN r ON true
      LEFT JOIN LATERAL price_cents(p_product, coalesce(r.refill_bytes, 0)) p ON true
  )
  SELECT v.enabled,
         v.enabled AND v.n < v.max_per_month AND NOT v.over,
         CASE WHEN NOT v.enabled THEN 'off' WHEN v.n >= v.max_per_month THEN 'monthly_cap' WHEN v.over THEN 'credit_limit' END,
         v.threshold_bytes, v.refill_bytes, v.method, v.cents, v.currency, v.n, v.max_per_month, v.limit_cents, v.used_cents
    FROM v
$$;
