-- Folds up to p_limit unfolded usage batches (docs/adr/0020): lines into balances (used_bytes,
-- requests_count) and usage_hourly, spends charged to their leases (moving min(spend, what the
-- lease still holds) from leased_bytes, or from striped_bytes for a lease drawn from a stripe
-- (docs/adr/0107: the stripe rows are not touched); spends past a lease only add to used_bytes), then the
-- sub-user lines into sub_user_products and sub_user_usage_hourly (after the balances: the lock
-- order of lease_acquire, balance row then the sub-user's); where spends past their leases left
-- less than the stripes hold, the stripes' free comes back (balance_stripes_drain: free is then
-- total - used - leased - striped, as it was without stripes); then billing decides on every balance
-- whose used rose (billing_check, docs/adr/0073). Returns how many batches it folded. Safe to run
-- concurrently (SKIP LOCKED), though one worker runs it.
CREATE OR REPLACE FUNCTION usage_fold(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
  r record;
BEGIN
  SELECT array_agg(id) INTO v_ids FROM (
    SELECT id FROM usage_batches WHERE folded_at IS NULL ORDER BY id LIMIT p_limit FOR UPDATE SKIP LOCKED
  ) s;
  IF v_ids IS NULL THEN
    RETURN 0;
  END IF;
  PERFORM 1 FROM bandwidth_leases
   WHERE id IN (SELECT lease_id FROM usage_batch_lease_spend WHERE batch_id = ANY (v_ids))
   ORDER BY id FOR UPDATE;

  WITH spend AS (
    SELECT lease_id, sum(bytes)::bigint AS bytes FROM usage_batch_lease_spend WHERE batch_id = ANY (v_ids) GROUP BY lease_id
  ), charge AS (
    SELECT l.id, l.account_id, l.product, l.stripe,
           least(s.bytes, CASE WHEN l.released_at IS NULL THEN l.granted_bytes - l.charged_bytes
                               ELSE greatest(0, least(l.spent_bytes, l.granted_bytes) - l.charged_bytes) END) AS bytes
      FROM spend s JOIN bandwidth_leases l ON l.id = s.lease_id
  ), charged AS (
    UPDATE bandwidth_leases l SET charged_bytes = l.charged_bytes + c.bytes FROM charge c WHERE l.id = c.id AND c.bytes > 0
    RETURNING l.id
  ), lines AS (
    SELECT account_id, product, sum(bytes_up + bytes_down)::bigint AS bytes, sum(requests)::bigint AS requests
      FROM usage_batch_lines WHERE batch_id = ANY (v_ids) GROUP BY account_id, product
  ), charges AS (
    SELECT account_id, product, coalesce(sum(bytes) FILTER (WHERE stripe IS NULL), 0)::bigint AS bytes,
           coalesce(sum(bytes) FILTER (WHERE stripe IS NOT NULL), 0)::bigint AS striped
      FROM charge GROUP BY account_id, product
  ), delta AS (
    SELECT coalesce(li.account_id, ch.account_id) AS account_id, coalesce(li.product, ch.product) AS product,
           coalesce(li.bytes, 0) AS used, coalesce(li.requests, 0) AS requests, coalesce(ch.bytes, 0) AS unleased,
           coalesce(ch.striped, 0) AS unstriped
      FROM lines li FULL JOIN charges ch ON ch.account_id = li.account_id AND ch.product = li.product
  )
  INSERT INTO balances AS b (account_id, product, used_bytes, requests_count, leased_bytes, striped_bytes)
  SELECT account_id, product, used, requests, unleased, unstriped FROM delta ORDER BY account_id, product
  ON CONFLICT (account_id, product) DO UPDATE
     SET used_bytes = b.used_bytes + EXCLUDED.used_bytes,
         requests_count = b.requests_count + EXCLUDED.requests_count,
         leased_bytes = b.leased_bytes - EXCLUDED.leased_bytes,
         striped_bytes = b.striped_bytes - EXCLUDED.striped_bytes,
         updated_at = now();

  INSERT INTO usage_hourly AS h (account_id, product, hour, bytes_up, bytes_down, requests)
  SELECT li.account_id, li.product, date_trunc('hour', ub.created_at), sum(li.bytes_up), sum(li.bytes_down), sum(li.requests)
    FROM usage_batch_lines li JOIN usage_batches ub ON ub.id = li.batch_id
   WHERE li.batch_id = ANY (v_ids)
   GROUP BY 1, 2, 3
  ON CONFLICT (account_id, product, hour) DO UPDATE
     SET bytes_up = h.bytes_up + EXCLUDED.bytes_up,
         bytes_down = h.bytes_down + EXCLUDED.bytes_down,
         requests = h.requests + EXCLUDED.requests;

  INSERT INTO sub_user_products AS p (sub_user_id, account_id, product, used_bytes, requests_count)
  SELECT sub_user_id, account_id, product, sum(bytes_up + bytes_down)::bigint, sum(requests)::bigint
    FROM usage_batch_sub_user_lines WHERE batch_id = ANY (v_ids)
   GROUP BY sub_user_id, account_id, product
   ORDER BY sub_user_id, product
  ON CONFLICT (sub_user_id, product) DO UPDATE
     SET used_bytes = p.used_bytes + EXCLUDED.used_bytes,
         requests_count = p.requests_count + EXCLUDED.requests_count,
         updated_at = now();

  INSERT INTO sub_user_usage_hourly AS h (sub_user_id, account_id, product, hour, bytes_up, bytes_down, requests)
  SELECT li.sub_user_id, li.account_id, li.product, date_trunc('hour', ub.created_at),
         sum(li.bytes_up), sum(li.bytes_down), sum(li.requests)
    FROM usage_batch_sub_user_lines li JOIN usage_batches ub ON ub.id = li.batch_id
   WHERE li.batch_id = ANY (v_ids)
   GROUP BY 1, 2, 3, 4
  ON CONFLICT (sub_user_id, product, hour) DO UPDATE
     SET bytes_up = h.bytes_up + EXCLUDED.bytes_up,
         bytes_down = h.bytes_down + EXCLUDED.bytes_down,
         requests = h.requests + EXCLUDED.requests;

  FOR r IN SELECT DISTINCT l.account_id, l.product FROM usage_batch_lines l WHERE l.batch_id = ANY (v_ids) ORDER BY 1, 2 LOOP
    -- Spends past their leases left less than the stripes were given: their free comes back.
    PERFORM balance_stripes_drain(b.account_id, b.product) FROM balances b
     WHERE b.account_id = r.account_id AND b.product = r.product
       AND b.total_bytes - b.used_bytes - b.leased_bytes - b.striped_bytes < 0;
    PERFORM billing_note_usage(r.account_id, r.product);
    PERFORM billing_check(r.account_id, r.product);
  END LOOP;

  UPDATE usage_batches SET folded_at = now() WHERE id = ANY (v_ids);
  RETURN array_length(v_ids, 1);
END $$;
