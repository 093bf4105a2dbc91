-- A gateway gives back the unspent part of open leases another gateway needs (docs/adr/0073):
-- p_cuts is [{lease_id, granted}], each lease's new grant, never below what was charged to it or
-- what its gateway reported relaying on it (nor above its grant). leased_bytes falls by what was
-- given back, so the next draw on the balance can have it (or the stripe's free rises, for a lease
-- drawn from one, docs/adr/0107). Lock order of usage_record and usage_fold: the lease rows by id,
-- then their balances, then their stripes. Returns the bytes given back.
CREATE OR REPLACE FUNCTION lease_shrink(p_gateway text, p_cuts jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_back bigint := 0;
BEGIN
  PERFORM 1 FROM bandwidth_leases l
   WHERE l.id IN (SELECT x.lease_id FROM jsonb_to_recordset(p_cuts) AS x (lease_id uuid))
     AND l.gateway_id = p_gateway AND l.released_at IS NULL
   ORDER BY l.id FOR UPDATE;
  PERFORM 1 FROM balances b
   WHERE (b.account_id, b.product) IN (
           SELECT l.account_id, l.product FROM bandwidth_leases l
            WHERE l.id IN (SELECT x.lease_id FROM jsonb_to_recordset(p_cuts) AS x (lease_id uuid)) AND l.stripe IS NULL)
   ORDER BY b.account_id, b.product FOR UPDATE;
  PERFORM 1 FROM balance_stripes s
   WHERE (s.account_id, s.product, s.stripe) IN (
           SELECT l.account_id, l.product, l.stripe FROM bandwidth_leases l
            WHERE l.id IN (SELECT x.lease_id FROM jsonb_to_recordset(p_cuts) AS x (lease_id uuid)) AND l.stripe IS NOT NULL)
   ORDER BY s.account_id, s.product, s.stripe FOR UPDATE;
  FOR r IN
    SELECT l.id, l.account_id, l.product, l.stripe,
           l.granted_bytes - greatest(l.charged_bytes, l.reported_bytes, least(l.granted_bytes, x.granted)) AS back
      FROM jsonb_to_recordset(p_cuts) AS x (lease_id uuid, granted bigint)
      JOIN bandwidth_leases l ON l.id = x.lease_id AND l.gateway_id = p_gateway AND l.released_at IS NULL
     ORDER BY l.id
  LOOP
    CONTINUE WHEN r.back <= 0;
    UPDATE bandwidth_leases SET granted_bytes = granted_bytes - r.back WHERE id = r.id;
    IF r.stripe IS NULL THEN
      UPDATE balances SET leased_bytes = leased_bytes - r.back WHERE account_id = r.account_id AND product = r.product;
    ELSE
      UPDATE balance_stripes SET free_bytes = free_bytes + r.back
       WHERE account_id = r.account_id AND product = r.product AND stripe = r.stripe;
    END IF;
    v_back := v_back + r.back;
  END LOOP;
  RETURN v_back;
END $$;
