-- The billing decision for one balance whose row the caller has locked (docs/adr/0073), on
-- remaining = total - used (billing_used: bytes held in leases are not used). Called when used
-- rises (a draw reporting usage, the fold), when a draw finds less free than its minimum lease,
-- and by the sweep.
-- - Auto-refill: a crossing is remaining falling below the threshold while armed; it disarms and
--   buys one refill named by the crossing's number (billing_refill). It is re-armed when remaining
--   rises to the threshold again (billing_rearm_balance: a purchase, a refill, a setting). A
--   crossing whose refill was not allowed then (the monthly cap) stays open: a draw that finds
--   too little free for its minimum lease (p_free < p_min), or the sweep (p_free 0), buys it under
--   the same crossing once a refill is allowed (a new month).
-- - Then, on what remains, the low-bandwidth alert: once per crossing of its threshold, queued
--   with its crossing number and rendered when sent.
CREATE OR REPLACE FUNCTION billing_check(p_account uuid, p_product text, p_free bigint DEFAULT NULL,
                                         p_min bigint DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  b balances%ROWTYPE;
  v_remaining bigint;
  v_threshold bigint;
  st billing_crossings%ROWTYPE;
  v_crossing integer;
  a record;
BEGIN
  SELECT * INTO b FROM balances WHERE account_id = p_account AND product = p_product;
  IF NOT FOUND OR b.total_bytes = 0 THEN
    RETURN;
  END IF;
  v_remaining := b.total_bytes - billing_used(b.used_bytes, b.reported_used_bytes);

  SELECT s.threshold_bytes INTO v_threshold FROM auto_refill_settings s
   WHERE s.account_id = p_account AND s.product = p_product AND s.enabled;
  IF FOUND THEN
    INSERT INTO billing_crossings (account_id, product, kind) VALUES (p_account, p_product, 'auto_refill')
    ON CONFLICT DO NOTHING;
    SELECT * INTO st FROM billing_crossings
     WHERE account_id = p_account AND product = p_product AND kind = 'auto_refill' FOR UPDATE;
    IF st.armed AND v_remaining < v_threshold THEN
      UPDATE billing_crossings SET armed = false, crossings = crossings + 1
       WHERE account_id = p_account AND product = p_product AND kind = 'auto_refill'
      RETURNING crossings INTO v_crossing;
      PERFORM billing_refill(p_account, p_product, v_crossing, v_remaining);
    ELSIF NOT st.armed AND st.crossings > 0 AND p_free IS NOT NULL AND p_free < coalesce(p_min, 1) THEN
      PERFORM billing_refill(p_account, p_product, st.crossings, v_remaining);
    END IF;
    SELECT * INTO b FROM balances WHERE account_id = p_account AND product = p_product;
    v_remaining := b.total_bytes - billing_used(b.used_bytes, b.reported_used_bytes);
  END IF;

  SELECT * INTO a FROM billing_alert_state(p_account, p_product);
  IF a.alert_on AND a.low THEN
    INSERT INTO billing_crossings AS c (account_id, product, kind, armed, crossings)
    VALUES (p_account, p_product, 'low_bandwidth', false, 1)
    ON CONFLICT (account_id, product, kind) DO UPDATE SET armed = false, crossings = c.crossings + 1
     WHERE c.armed
    RETURNING c.crossings INTO v_crossing;
    IF v_crossing IS NOT NULL THEN
      PERFORM email_enqueue(p_account, 'low_bandwidth', p_account || ':' || p_product || ':' || v_crossing,
                            jsonb_build_object('product', p_product, 'crossing', v_crossing));
    END IF;
  END IF;
END $$;
