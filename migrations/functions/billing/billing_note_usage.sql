-- Raises what is known to be used of a balance (reported_used_bytes; billing_used reads it) to the
-- folded usage plus what the gateways reported relaying on their open leases and the fold has not
-- charged yet (per lease: min(reported, granted) - charged). Never lowers it: a lease returned
-- before the fold stops counting here until its spends are folded, and what was known stays
-- known. The caller holds the balance row lock (a draw, the fold). Returns whether it rose.
CREATE OR REPLACE FUNCTION billing_note_usage(p_account uuid, p_product text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_unfolded bigint;
BEGIN
  SELECT coalesce(sum(greatest(0, least(l.reported_bytes, l.granted_bytes) - l.charged_bytes)), 0) INTO v_unfolded
    FROM bandwidth_leases l
   WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL AND l.reported_bytes > 0;
  UPDATE balances SET reported_used_bytes = used_bytes + v_unfolded
   WHERE account_id = p_account AND product = p_product
     AND used_bytes + v_unfolded > billing_used(used_bytes, reported_used_bytes);
  RETURN FOUND;
END $$;
