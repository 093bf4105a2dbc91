-- Raises what is known to be used of a balance (reported_used_bytes; billing_used reads it) to the
-- folded usage plus every byte the gateways reported relaying on their leases that the fold has
-- not charged yet: per open lease, min(reported, granted) - charged; per lease returned before the
-- fold, min(spent, granted) - charged (docs/adr/0097, addendum). A returned lease's part is what
-- it still holds in leased_bytes (lease_release keeps it there until the fold charges it), or in
-- striped_bytes for one drawn from a stripe (docs/adr/0107), so it is read as what all leases hold
-- less the unreported part of the open ones: returned leases are never scanned (only open ones
-- are indexed), and one statement reads the balance, its stripes and its open leases at once.
-- Never lowers it: what was known stays known. The caller holds the balance row lock (a draw, the
-- fold). Returns whether it rose.
CREATE OR REPLACE FUNCTION billing_note_usage(p_account uuid, p_product text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_unfolded bigint;
BEGIN
  SELECT greatest(0, b.leased_bytes + b.striped_bytes
                     - (SELECT coalesce(sum(x.free_bytes), 0) FROM balance_stripes x
                         WHERE x.account_id = p_account AND x.product = p_product)
                     - (SELECT coalesce(sum(l.granted_bytes - greatest(l.charged_bytes, least(l.reported_bytes, l.granted_bytes))), 0)
                          FROM bandwidth_leases l
                         WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL))::bigint
    INTO v_unfolded
    FROM balances b WHERE b.account_id = p_account AND b.product = p_product;
  UPDATE balances SET reported_used_bytes = used_bytes + v_unfolded
   WHERE account_id = p_account AND product = p_product
     AND used_bytes + v_unfolded > billing_used(used_bytes, reported_used_bytes);
  RETURN FOUND;
END $$;
