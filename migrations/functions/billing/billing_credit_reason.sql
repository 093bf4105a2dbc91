-- Why an amount does not fit in the credit limit (docs/api.md "Credit limit"), as the
-- "auto-refill failed" email says it; NULL when used + amount stays within the limit.
CREATE OR REPLACE FUNCTION billing_credit_reason(p_limit_cents bigint, p_used_cents bigint, p_amount_cents bigint,
                                                 p_currency text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_used_cents + p_amount_cents > p_limit_cents THEN
    format('it would pass the credit limit of %s %s for this month: %s %s billed so far, %s %s more',
           to_char(p_limit_cents / 100.0, 'FM999999999990.00'), p_currency,
           to_char(p_used_cents / 100.0, 'FM999999999990.00'), p_currency,
           to_char(p_amount_cents / 100.0, 'FM999999999990.00'), p_currency)
  END
$$;
