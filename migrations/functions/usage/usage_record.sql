-- One gateway flush, in one round trip (docs/adr/0020): the batch (skipped entirely if its
-- idempotency key is already there: a retried flush), its lines, its sub-user lines
-- ({sub_user_id, account_id, product, bytes_up, bytes_down, requests}; a sub-user deleted meanwhile
-- is dropped), its spends per lease, and the leases it releases. p_lines is the account's whole
-- usage, sub-users' bytes included; lines of accounts deleted meanwhile are dropped instead of
-- failing the batch forever.
-- Lock order, shared with usage_fold: every lease the batch spends on or releases, by id, then
-- the balances of the released leases drawn on a balance row, by (account, product), then the
-- stripes of those drawn from a stripe (docs/adr/0107: a hot balance's row is not locked by their
-- release), by (account, product, stripe), and only then the writes (a flush releasing leases
-- A < B and a fold holding B that then updates A's balance would deadlock otherwise). The spends
-- count because their foreign key takes a KEY SHARE lock on the lease, which conflicts with the
-- fold's FOR UPDATE.
CREATE OR REPLACE FUNCTION usage_record(p_key text, p_gateway text, p_lines jsonb, p_spends jsonb, p_releases jsonb,
                             p_sub_lines jsonb DEFAULT '[]'::jsonb) RETURNS boolean
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
            WHERE l.id IN (SELECT x.lease_id FROM jsonb_to_recordset(p_releases) AS x (lease_id uuid)) AND l.stripe IS NULL)
   ORDER BY b.account_id, b.product FOR UPDATE;
  PERFORM 1 FROM balance_stripes s
   WHERE (s.account_id, s.product, s.stripe) IN (
           SELECT l.account_id, l.product, l.stripe FROM bandwidth_leases l
            WHERE l.id IN (SELECT x.lease_id FROM jsonb_to_recordset(p_releases) AS x (lease_id uuid)) AND l.stripe IS NOT NULL)
   ORDER BY s.account_id, s.product, s.stripe FOR UPDATE;
  INSERT INTO usage_batch_lines (batch_id, account_id, product, bytes_up, bytes_down, requests)
  SELECT v_batch, x.account_id, x.product, x.bytes_up, x.bytes_down, x.requests
    FROM jsonb_to_recordset(p_lines) AS x (account_id uuid, product text, bytes_up bigint, bytes_down bigint, requests bigint)
   WHERE EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id);
  INSERT INTO usage_batch_sub_user_lines (batch_id, sub_user_id, account_id, product, bytes_up, bytes_down, requests)
  SELECT v_batch, x.sub_user_id, x.account_id, x.product, x.bytes_up, x.bytes_down, x.requests
    FROM jsonb_to_recordset(p_sub_lines)
         AS x (sub_user_id uuid, account_id uuid, product text, bytes_up bigint, bytes_down bigint, requests bigint)
   WHERE EXISTS (SELECT 1 FROM sub_users s WHERE s.id = x.sub_user_id AND s.account_id = x.account_id);
  INSERT INTO usage_batch_lease_spend (batch_id, lease_id, bytes)
  SELECT v_batch, x.lease_id, x.bytes
    FROM jsonb_to_recordset(p_spends) AS x (lease_id uuid, bytes bigint)
   WHERE EXISTS (SELECT 1 FROM bandwidth_leases l WHERE l.id = x.lease_id);
  FOR r IN SELECT x.lease_id, x.spent FROM jsonb_to_recordset(p_releases) AS x (lease_id uuid, spent bigint) ORDER BY x.lease_id LOOP
    PERFORM lease_release(r.lease_id, r.spent);
  END LOOP;
  RETURN true;
END $$;
