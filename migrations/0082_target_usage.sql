-- Target statistics (docs/adr/0026): bytes and requests per registrable domain
-- (never a path, a query or a full host name) per account, product and UTC day, kept 30 days by the
-- worker. Gateways tally in memory and add their rows with target_usage_record() on their usage
-- flush; billing never reads this table.
--
-- Sub-users do not exist yet. When they do, a nullable sub_user_id column joins the key through a
-- unique index on (account_id, product, day, coalesce(sub_user_id, <nil uuid>), domain).

-- The account-level switch (default on; the customer turns it off in the API or dashboard, the
-- operator in the admin API). Off: no rows are recorded, and turning it off deletes the stored ones.
ALTER TABLE accounts ADD COLUMN target_stats boolean NOT NULL DEFAULT true;

CREATE TABLE target_usage (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  day date NOT NULL,
  -- A registrable domain, an IP address, or '(other)': the domains past the per-day cap
  -- (parentheses cannot occur in a host name).
  domain text NOT NULL CHECK (length(domain) BETWEEN 1 AND 253 AND domain !~ '[/?#[:space:]]'),
  bytes bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  PRIMARY KEY (account_id, product, day, domain)
);
-- The retention job deletes by day.
CREATE INDEX target_usage_day_idx ON target_usage (day);

-- Adds a gateway's tally: p_rows is a JSON array of {account_id, product, day, domain, bytes,
-- requests}. Rows of accounts that opted out (or no longer exist) are skipped. A (account, product,
-- day) that already tracks p_cap domains adds a new domain to '(other)' instead. The account rows
-- are locked (in id order) for the statement: two gateways adding to one account take turns, so the
-- cap holds exactly, and an opt-out waits for a flush in progress and then deletes what it wrote.
-- lock_timeout: a flush must never hang behind a long transaction (it retries on its next tick).
CREATE FUNCTION target_usage_record(p_rows jsonb, p_cap integer) RETURNS integer
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
       AND (SELECT count(*) FROM target_usage t
             WHERE t.account_id = r.account_id AND t.product = r.product AND t.day = r.day
               AND t.domain <> '(other)') >= p_cap THEN
      v_domain := '(other)';
    END IF;
    INSERT INTO target_usage AS t (account_id, product, day, domain, bytes, requests)
    VALUES (r.account_id, r.product, r.day, v_domain, r.bytes, r.requests)
    ON CONFLICT (account_id, product, day, domain)
    DO UPDATE SET bytes = t.bytes + EXCLUDED.bytes, requests = t.requests + EXCLUDED.requests;
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;
