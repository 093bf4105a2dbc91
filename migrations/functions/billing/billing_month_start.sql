-- The first instant of the calendar month (UTC) holding p_at: the monthly refill cap and the
-- credit limit count from there (docs/api.md "Auto-refill", "Credit limit").
CREATE OR REPLACE FUNCTION billing_month_start(p_at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
  SELECT date_trunc('month', p_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
$$;
