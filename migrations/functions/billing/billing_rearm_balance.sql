-- Re-arms the crossings of one balance whose remaining is above their thresholds again
-- (docs/adr/0073): auto-refill at remaining >= its threshold, the low-bandwidth alert at
-- remaining above its threshold. Used never falls, so remaining rises only by a purchase (or a
-- refill) or a setting (threshold, percent, floor) changed: the triggers billing_rearm and
-- billing_settings_rearm call this. The caller holds the balance row lock.
CREATE OR REPLACE FUNCTION billing_rearm_balance(p_account uuid, p_product text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  a record;
BEGIN
  SELECT * INTO a FROM billing_alert_state(p_account, p_product);
  IF NOT FOUND THEN
    RETURN;
  END IF;
  UPDATE billing_crossings c SET armed = true
   WHERE c.account_id = p_account AND c.product = p_product AND NOT c.armed
     AND ((c.kind = 'low_bandwidth' AND NOT a.low)
          OR (c.kind = 'auto_refill' AND a.remaining_bytes >= coalesce(
               (SELECT s.threshold_bytes FROM auto_refill_settings s WHERE s.account_id = p_account AND s.product = p_product), 0)));
END $$;
