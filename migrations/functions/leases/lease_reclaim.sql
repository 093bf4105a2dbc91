-- Releases open leases whose gateway can no longer report on them, as lease_reap always did for
-- expired ones: spent = charged + the spends of its flushed, unfolded batches (what the gateway
-- flushed is all the database knows; docs/adr/0025 says what that loses). The caller holds the
-- lease rows locked (by id: the lock order of usage_record and usage_fold); this locks their
-- balances (of leases drawn on the balance row), in order, then their stripes (of leases drawn from
-- a stripe, docs/adr/0107), in order, before lease_release writes them. Released leases are
-- skipped, so a lease reclaimed twice, or released by its gateway meanwhile, is returned once.
CREATE OR REPLACE FUNCTION lease_reclaim(p_ids uuid[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  PERFORM 1 FROM balances b
   WHERE (b.account_id, b.product) IN (SELECT l.account_id, l.product FROM bandwidth_leases l
                                        WHERE l.id = ANY (p_ids) AND l.stripe IS NULL)
   ORDER BY b.account_id, b.product FOR UPDATE;
  PERFORM 1 FROM balance_stripes x
   WHERE (x.account_id, x.product, x.stripe) IN (SELECT l.account_id, l.product, l.stripe FROM bandwidth_leases l
                                                  WHERE l.id = ANY (p_ids) AND l.stripe IS NOT NULL)
   ORDER BY x.account_id, x.product, x.stripe FOR UPDATE;
  FOR r IN
    SELECT l.id, l.charged_bytes + coalesce((
             SELECT sum(s.bytes) FROM usage_batch_lease_spend s JOIN usage_batches ub ON ub.id = s.batch_id
              WHERE s.lease_id = l.id AND ub.folded_at IS NULL), 0)::bigint AS spent
      FROM bandwidth_leases l
     WHERE l.id = ANY (p_ids) AND l.released_at IS NULL
     ORDER BY l.id
  LOOP
    IF lease_release(r.id, r.spent) THEN
      n := n + 1;
    END IF;
  END LOOP;
  RETURN n;
END $$;
