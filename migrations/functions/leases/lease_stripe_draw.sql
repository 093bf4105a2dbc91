-- A draw from a hot balance's stripes (docs/adr/0107), for lease_acquire: one stripe row with at
-- least p_min free that no one else holds (the gateway's own stripe first, by the hash of its id,
-- else the one with most free; FOR UPDATE SKIP LOCKED: it never waits), while the worker keeps the
-- stripes open (balances.stripes_open, read after the stripe is locked, so a closing that came
-- first is seen). It grants least(wanted, greatest(min, free / 2), free) of the stripe's free
-- bytes, and the lease remembers its stripe. No billing decision: the stripes are open only while
-- remaining stays clear of every threshold (balance_stripes_rebalance), and the fold notes what
-- the draws reported. No row: nothing taken (the stripes are closed, empty or all busy), and the
-- caller draws on the balance row. out_free and out_held are read without locks (estimates of
-- the whole balance: its free and its stripes' free, and what all its leases hold).
-- Lock order: the caller holds the lease rows; this takes one stripe row and waits for nothing.
CREATE OR REPLACE FUNCTION lease_stripe_draw(p_account uuid, p_product text, p_gateway text, p_wanted bigint,
                                             p_min bigint, p_ttl_seconds integer)
RETURNS TABLE (out_lease_id uuid, out_granted bigint, out_expires_at timestamptz, out_free bigint, out_held bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_own integer := (hashtext(p_gateway) & 2147483647) % (balance_stripe_count()).stripes;
  s balance_stripes%ROWTYPE;
  v_grant bigint;
  v_id uuid;
  v_expires timestamptz;
BEGIN
  -- A stripe locked and then found closed or short is let go (the block's rollback).
  BEGIN
    SELECT * INTO s FROM balance_stripes x
     WHERE x.account_id = p_account AND x.product = p_product AND x.free_bytes >= greatest(p_min, 1)
     ORDER BY x.stripe = v_own DESC, x.free_bytes DESC
     LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF NOT FOUND OR s.free_bytes < greatest(p_min, 1) OR NOT EXISTS (
         SELECT 1 FROM balances b WHERE b.account_id = p_account AND b.product = p_product AND b.stripes_open) THEN
      RAISE SQLSTATE 'PFS01';
    END IF;
  EXCEPTION WHEN SQLSTATE 'PFS01' THEN
    RETURN;
  END;
  v_grant := least(p_wanted, greatest(p_min, s.free_bytes / 2), s.free_bytes);
  UPDATE balance_stripes SET free_bytes = free_bytes - v_grant
   WHERE account_id = p_account AND product = p_product AND stripe = s.stripe;
  INSERT INTO bandwidth_leases (account_id, product, gateway_id, granted_bytes, expires_at, stripe)
  VALUES (p_account, p_product, p_gateway, v_grant, now() + make_interval(secs => p_ttl_seconds), s.stripe)
  RETURNING id, expires_at INTO v_id, v_expires;
  RETURN QUERY
    SELECT v_id, v_grant, v_expires,
           greatest(0, b.total_bytes - b.used_bytes - b.leased_bytes - b.striped_bytes)
             + (SELECT coalesce(sum(x.free_bytes), 0) FROM balance_stripes x
                 WHERE x.account_id = p_account AND x.product = p_product)::bigint,
           b.leased_bytes + b.striped_bytes
             - (SELECT coalesce(sum(x.free_bytes), 0) FROM balance_stripes x
                 WHERE x.account_id = p_account AND x.product = p_product)::bigint
      FROM balances b WHERE b.account_id = p_account AND b.product = p_product;
END $$;
