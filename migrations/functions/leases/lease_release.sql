-- Returns the unspent part of a lease. p_spent is everything the gateway billed against it (all
-- its batches, folded or not). Idempotent: a released lease is left alone. A lease drawn from a
-- stripe (docs/adr/0107) gives its unspent bytes back to that stripe's free (striped_bytes, what
-- the stripes hold with their leases, does not change), one drawn on the balance row to the
-- balance. The caller holds the lease row and the balance row or stripe row, in that order.
CREATE OR REPLACE FUNCTION lease_release(p_lease uuid, p_spent bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  l bandwidth_leases%ROWTYPE;
  v_still_held bigint;
BEGIN
  SELECT * INTO l FROM bandwidth_leases WHERE id = p_lease FOR UPDATE;
  IF NOT FOUND OR l.released_at IS NOT NULL THEN
    RETURN false;
  END IF;
  v_still_held := greatest(0, least(p_spent, l.granted_bytes) - l.charged_bytes);
  UPDATE bandwidth_leases SET released_at = now(), spent_bytes = p_spent WHERE id = p_lease;
  IF l.stripe IS NULL THEN
    UPDATE balances SET leased_bytes = leased_bytes - ((l.granted_bytes - l.charged_bytes) - v_still_held)
     WHERE account_id = l.account_id AND product = l.product;
  ELSE
    UPDATE balance_stripes SET free_bytes = free_bytes + ((l.granted_bytes - l.charged_bytes) - v_still_held)
     WHERE account_id = l.account_id AND product = l.product AND stripe = l.stripe;
  END IF;
  RETURN true;
END $$;
