-- The low-bandwidth alert's conditions for one balance (docs/alerts.md), as the decision in
-- billing_check, the sender's re-check and the email's text all read them: bought (total), used,
-- remaining, whether the alert is on, its threshold, and whether remaining is at or below it.
CREATE OR REPLACE FUNCTION billing_alert_state(p_account uuid, p_product text)
RETURNS TABLE (total_bytes bigint, used_bytes bigint, remaining_bytes bigint, alert_on boolean, percent integer,
               floor_bytes bigint, threshold_bytes bigint, low boolean)
LANGUAGE sql STABLE AS $$
  SELECT b.total_bytes, billing_used(b.used_bytes, b.reported_used_bytes),
         b.total_bytes - billing_used(b.used_bytes, b.reported_used_bytes),
         coalesce(s.low_bandwidth, true), coalesce(s.low_bandwidth_percent, 10), s.low_bandwidth_floor_bytes,
         billing_alert_threshold(b.total_bytes, s.low_bandwidth_percent, s.low_bandwidth_floor_bytes),
         b.total_bytes > 0 AND b.total_bytes - billing_used(b.used_bytes, b.reported_used_bytes)
           <= billing_alert_threshold(b.total_bytes, s.low_bandwidth_percent, s.low_bandwidth_floor_bytes)
    FROM balances b LEFT JOIN alert_settings s ON s.account_id = b.account_id
   WHERE b.account_id = p_account AND b.product = p_product
$$;
