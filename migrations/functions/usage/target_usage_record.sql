-- Adds a gateway's target statistics (docs/adr/0026): p_rows is a JSON array of {account_id,
-- product, day, sub_user, domain, bytes, requests}. Rows of accounts that opted out (or no longer
-- exist) are skipped. A (account, product, day) that already tracks p_cap domains adds a new domain
-- to '(other)' instead. The account rows are locked (in id order) for the statement: two gateways
-- adding to one account take turns, so the cap holds exactly, and an opt-out waits for a flush in
-- progress and then deletes what it wrote. lock_timeout: a flush must never hang behind a long
-- transaction (it retries on its next tick).
CREATE OR REPLACE FUNCTION target_usage_record(p_rows jsonb, p_cap integer) RETURNS integer
LANGUAGE plpgsql SET lock_timeout = '2s' AS $$
DECLARE
  r record;
  v_domain text;
  n integer := 0;
BEGIN
  PERFORM 1 FROM accounts a
   WHERE a.id IN (SELECT (x ->> 'account_id')::uuid FROM jsonb_array_elements(p_rows) x)
   ORDER BY a.id FOR NO KEY UPDATE;
  FOR r IN
    SELECT (x ->> 'account_id')::uuid AS account_id, x ->> 'product' AS product, (x ->> 'day')::date AS day,
           coalesce(x ->> 'sub_user', '') AS sub_user,
           x ->> 'domain' AS domain, (x ->> 'bytes')::bigint AS bytes, (x ->> 'requests')::bigint AS requests
      FROM jsonb_array_elements(p_rows) x
      JOIN accounts a ON a.id = (x ->> 'account_id')::uuid AND a.target_stats
     -- Bigger first: when the cap is reached in this batch, the smaller domains fold into '(other)'.
     ORDER BY 1, 2, 3, (x ->> 'bytes')::bigint DESC
  LOOP
    v_domain := r.domain;
    IF v_domain <> '(other)' AND NOT EXISTS (
         SELECT 1 FROM target_usage t
          WHERE t.account_id = r.account_id AND t.product = r.product AND t.day = r.day AND t.domain = v_domain)
       AND (SELECT count(DISTINCT t.domain) FROM target_usage t
             WHERE t.account_id = r.account_id AND t.product = r.product AND t.day = r.day
               AND t.domain <> '(other)') >= p_cap THEN
      v_domain := '(other)';
    END IF;
    INSERT INTO target_usage AS t (account_id, product, day, sub_user, domain, bytes, requests)
    VALUES (r.account_id, r.product, r.day, r.sub_user, v_domain, r.bytes, r.requests)
    ON CONFLICT (account_id, product, day, sub_user, domain)
    DO UPDATE SET bytes = t.bytes + EXCLUDED.bytes, requests = t.requests + EXCLUDED.requests;
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;
