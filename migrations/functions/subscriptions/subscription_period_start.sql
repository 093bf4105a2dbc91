-- The start of a subscription's period n (docs/billing.md "Periods"): started_at plus n months in
-- UTC, the day clamped to the month's last day and always computed from started_at, so a
-- subscription started on 31 January renews on 28 (29) February and again on 31 March.
CREATE OR REPLACE FUNCTION subscription_period_start(p_started timestamptz, p_n integer) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
  SELECT ((p_started AT TIME ZONE 'UTC') + make_interval(months => p_n)) AT TIME ZONE 'UTC'
$$;
