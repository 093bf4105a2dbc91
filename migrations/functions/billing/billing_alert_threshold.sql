-- The low-bandwidth alert's threshold (docs/alerts.md): the account's percent of what was bought
-- for the product, or its floor when that is higher. The alert fires at remaining <= this.
CREATE OR REPLACE FUNCTION billing_alert_threshold(p_total bigint, p_percent integer, p_floor bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT greatest(p_total * coalesce(p_percent, 10) / 100, coalesce(p_floor, 0))
$$;
