-- A gateway's queued flushes in one round trip (docs/adr/0090): p_batches is a JSON array of
-- {key, lines, spends, releases, sub_lines} in the order they were built, each recorded by
-- usage_record (a batch whose key is already there is skipped: a retry). All or none: a failure
-- leaves every batch queued, to be retried with the same keys. Returns how many were new.
-- Lock order, as usage_record and usage_fold: every lease any of the batches spends on or releases,
-- by id, then the balances, then the stripes of the released leases (by where each was drawn,
-- docs/adr/0107); the batches' own locks are then held already
-- (one batch's leases locked before an earlier batch's lower ids would break the order).
CREATE OR REPLACE FUNCTION usage_record_many(p_gateway text, p_batches jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  b jsonb;
  n integer := 0;
BEGIN
  PERFORM 1 FROM bandwidth_leases
   WHERE id IN (SELECT (x ->> 'lease_id')::uuid
                  FROM jsonb_array_elements(p_batches) AS bt,
                       jsonb_array_elements(coalesce(bt -> 'releases', '[]') || coalesce(bt -> 'spends', '[]')) AS x)
   ORDER BY id FOR UPDATE;
  PERFORM 1 FROM balances bal
   WHERE (bal.account_id, bal.product) IN (
           SELECT l.account_id, l.product FROM bandwidth_leases l
            WHERE l.id IN (SELECT (x ->> 'lease_id')::uuid
                             FROM jsonb_array_elements(p_batches) AS bt,
                                  jsonb_array_elements(coalesce(bt -> 'releases', '[]')) AS x)
              AND l.stripe IS NULL)
   ORDER BY bal.account_id, bal.product FOR UPDATE;
  PERFORM 1 FROM balance_stripes s
   WHERE (s.account_id, s.product, s.stripe) IN (
           SELECT l.account_id, l.product, l.stripe FROM bandwidth_leases l
            WHERE l.id IN (SELECT (x ->> 'lease_id')::uuid
                             FROM jsonb_array_elements(p_batches) AS bt,
                                  jsonb_array_elements(coalesce(bt -> 'releases', '[]')) AS x)
              AND l.stripe IS NOT NULL)
   ORDER BY s.account_id, s.product, s.stripe FOR UPDATE;
  FOR b IN SELECT e FROM jsonb_array_elements(p_batches) WITH ORDINALITY AS t (e, i) ORDER BY i LOOP
    IF usage_record(b ->> 'key', p_gateway, coalesce(b -> 'lines', '[]'), coalesce(b -> 'spends', '[]'),
                    coalesce(b -> 'releases', '[]'), coalesce(b -> 'sub_lines', '[]')) THEN
      n := n + 1;
    END IF;
  END LOOP;
  RETURN n;
END $$;
