-- usage_record locked in the order lease, balance, lease, ... (lease_release one lease at a time)
-- while usage_fold locks all its leases (by id) and then balances (by account, product): a
-- flush releasing leases A < B and a fold holding B that then updates A's balance deadlock.
-- Now usage_record first locks every lease the batch spends on or releases, ordered by id, then
-- their balances, ordered by (account, product), and only then writes: the fold's order. The
-- spends are included because their foreign key takes a KEY SHARE lock on the lease, which
-- conflicts with the fold's FOR UPDATE.
CREATE OR REPLACE FUNCTION usage_record(p_key text, p_gateway text, p_lines jsonb, p_spends jsonb, p_releases jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_batch bigint;
  r record;
BEGIN
  INSERT INTO usage_batches (idempotency_key, gateway_id) VALUES (p_key, p_gateway)
  ON CONFLICT (idempotency_key) DO NOTHING RETURNING id INTO v_batch;
  IF v_batch IS NULL THEN
    RETURN false;
  END IF;
  PERFORM 1 FROM bandwidth_leases
   WHERE id IN (SELECT x.lease_id FROM jsonb_to_recordset(p_releases) AS x (lease_id uuid)
                UNION SELECT x.lease_id FROM jsonb_to_recordset(p_spends) AS x (lease_id uuid))
   ORDER BY id FOR UPDATE;
  PERFORM 1 FROM balances b
   WHERE (b.account_id, b.product) IN (
           SELECT l.account_id, l.product FROM bandwidth_leases l
            WHERE l.id IN (SELECT x.lease_id FROM jsonb_to_recordset(p_releases) AS x (lease_id uuid)))
   ORDER BY b.account_id, b.product FOR UPDATE;
  INSERT INTO usage_batch_lines (batch_id, account_id, product, bytes_up, bytes_down, requests)
  SELECT v_batch, x.account_id, x.product, x.bytes_up, x.bytes_down, x.requests
    FROM jsonb_to_recordset(p_lines) AS x (account_id uuid, product text, bytes_up bigint, bytes_down bigint, requests bigint)
   WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id);
  INSERT INTO usage_batch_lease_spend (batch_id, lease_id, bytes)
  SELECT v_batch, x.lease_id, x.bytes
    FROM jsonb_to_recordset(p_spends) AS x (lease_id uuid, bytes bigint)
   WHERE EXISTS (SELECT 1 FROM bandwidth_leases l WHERE l.id = x.lease_id);
  FOR r IN SELECT x.lease_id, x.spent FROM jsonb_to_recordset(p_releases) AS x (lease_id uuid, spent bigint) ORDER BY x.lease_id LOOP
    PERFORM lease_release(r.lease_id, r.spent);
  END LOOP;
  RETURN true;
END $$;
