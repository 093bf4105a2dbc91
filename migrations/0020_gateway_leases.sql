-- Bandwidth leases and usage settlement (docs/adr/0020). All arithmetic happens here, under row
-- locks, so gateways and the worker cannot break the invariants by racing.
--
-- A lease's share of balances.leased_bytes ("what it still holds") is:
--   open:      granted_bytes - charged_bytes
--   released:  greatest(0, least(spent_bytes, granted_bytes) - charged_bytes)
-- i.e. after release it still holds exactly the bytes the gateway reported spending on it that
-- the fold has not charged yet (batches flushed but not folded). Folding a spend moves bytes
-- from leased_bytes to used_bytes in one statement, so no byte is ever counted in both or in
-- neither: total - used - leased (what can still be granted) never over-states what is left.
--
-- Lock order everywhere: lease rows (by id), then balance rows. usage_fold locks every lease it
-- touches before any balance row; lease_release locks one lease, then its balance.

-- What the gateway reported having spent on a lease when it released it (NULL while open).
ALTER TABLE bandwidth_leases ADD COLUMN spent_bytes bigint CHECK (spent_bytes >= 0);

-- Per batch, how many of its bytes were spent on which lease (a batch line can span two leases
-- of the same account and product when one runs out and the next is granted mid-flush).
CREATE TABLE usage_batch_lease_spend (
  batch_id bigint NOT NULL REFERENCES usage_batches (id) ON DELETE CASCADE,
  lease_id uuid NOT NULL REFERENCES bandwidth_leases (id) ON DELETE CASCADE,
  bytes bigint NOT NULL CHECK (bytes >= 0),
  PRIMARY KEY (batch_id, lease_id)
);
CREATE INDEX usage_batch_lease_spend_lease_idx ON usage_batch_lease_spend (lease_id);

-- Grants min(wanted, what is free), shrinking near zero: never more than half of what is free
-- divided among the gateways already holding a lease for it (plus this one), never less than
-- p_min unless less than p_min is free (then all of it: progress without 1-byte livelock).
-- Returns granted = 0 and no lease when nothing is free, with out_held = what leases still hold.
CREATE FUNCTION lease_acquire(p_account uuid, p_product text, p_gateway text, p_wanted bigint, p_min bigint, p_ttl_seconds integer)
RETURNS TABLE (out_lease_id uuid, out_granted bigint, out_expires_at timestamptz, out_free bigint, out_held bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_free bigint;
  v_held bigint;
  v_pods integer;
  v_grant bigint;
  v_id uuid;
  v_expires timestamptz;
BEGIN
  SELECT greatest(0, b.total_bytes - b.used_bytes - b.leased_bytes), b.leased_bytes INTO v_free, v_held
    FROM balances b WHERE b.account_id = p_account AND b.product = p_product FOR UPDATE;
  IF v_free IS NULL OR v_free = 0 THEN
    -- out_held > 0: nothing is free now, but other gateways hold leases they may give back.
    RETURN QUERY SELECT NULL::uuid, 0::bigint, NULL::timestamptz, 0::bigint, coalesce(v_held, 0::bigint);
    RETURN;
  END IF;
  SELECT count(DISTINCT l.gateway_id) INTO v_pods FROM bandwidth_leases l
   WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL AND l.gateway_id <> p_gateway;
  v_grant := least(p_wanted, greatest(p_min, v_free / (2 * (v_pods + 1))), v_free);
  UPDATE balances SET leased_bytes = leased_bytes + v_grant WHERE account_id = p_account AND product = p_product;
  INSERT INTO bandwidth_leases (account_id, product, gateway_id, granted_bytes, expires_at)
  VALUES (p_account, p_product, p_gateway, v_grant, now() + make_interval(secs => p_ttl_seconds))
  RETURNING id, expires_at INTO v_id, v_expires;
  RETURN QUERY SELECT v_id, v_grant, v_expires, v_free - v_grant, v_held + v_grant;
END $$;

-- Returns the unspent part of a lease. p_spent is everything the gateway billed against it (all
-- its batches, folded or not). Idempotent: a released lease is left alone.
CREATE FUNCTION lease_release(p_lease uuid, p_spent bigint) RETURNS boolean
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
  UPDATE balances SET leased_bytes = leased_bytes - ((l.granted_bytes - l.charged_bytes) - v_still_held)
   WHERE account_id = l.account_id AND product = l.product;
  RETURN true;
END $$;

-- One gateway flush, in one round trip: the batch (skipped entirely if its idempotency key is
-- already there: a retried flush), its lines, its spends per lease, and the leases it releases.
-- Lines of accounts deleted meanwhile are dropped instead of failing the batch forever.
-- Lock order, shared with usage_fold: every lease the batch spends on or releases, by id, then
-- their balances, by (account, product), and only then the writes (a flush releasing leases
-- A < B and a fold holding B that then updates A's balance would deadlock otherwise). The spends
-- count because their foreign key takes a KEY SHARE lock on the lease, which conflicts with the
-- fold's FOR UPDATE.
CREATE FUNCTION usage_record(p_key text, p_gateway text, p_lines jsonb, p_spends jsonb, p_releases jsonb) RETURNS boolean
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

-- Folds up to p_limit unfolded batches into balances (used, requests, leased) and usage_hourly.
-- Returns how many it folded. Safe to run concurrently (SKIP LOCKED), though one worker runs it.
CREATE FUNCTION usage_fold(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
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
    SELECT l.id, l.account_id, l.product,
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
    SELECT account_id, product, sum(bytes)::bigint AS bytes FROM charge GROUP BY account_id, product
  ), delta AS (
    SELECT coalesce(li.account_id, ch.account_id) AS account_id, coalesce(li.product, ch.product) AS product,
           coalesce(li.bytes, 0) AS used, coalesce(li.requests, 0) AS requests, coalesce(ch.bytes, 0) AS unleased
      FROM lines li FULL JOIN charges ch ON ch.account_id = li.account_id AND ch.product = li.product
  )
  INSERT INTO balances AS b (account_id, product, used_bytes, requests_count, leased_bytes)
  SELECT account_id, product, used, requests, unleased FROM delta ORDER BY account_id, product
  ON CONFLICT (account_id, product) DO UPDATE
     SET used_bytes = b.used_bytes + EXCLUDED.used_bytes,
         requests_count = b.requests_count + EXCLUDED.requests_count,
         leased_bytes = b.leased_bytes - EXCLUDED.leased_bytes,
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

  UPDATE usage_batches SET folded_at = now() WHERE id = ANY (v_ids);
  RETURN array_length(v_ids, 1);
END $$;

-- Releases leases whose gateway stopped renewing them (a crashed pod): what it spent is what
-- its flushed batches say, folded or not. Bytes it relayed but never flushed are lost to billing
-- (at most one flush interval of one pod: docs/adr/0020).
CREATE FUNCTION lease_reap(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n integer := 0;
  v_ids uuid[];
BEGIN
  -- The lock order of usage_fold and usage_record: the leases by id, then their balances.
  SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
    SELECT id FROM bandwidth_leases WHERE released_at IS NULL AND expires_at < now()
     ORDER BY id LIMIT p_limit FOR UPDATE) x;
  IF v_ids IS NULL THEN
    RETURN 0;
  END IF;
  PERFORM 1 FROM balances b
   WHERE (b.account_id, b.product) IN (SELECT l.account_id, l.product FROM bandwidth_leases l WHERE l.id = ANY (v_ids))
   ORDER BY b.account_id, b.product FOR UPDATE;
  FOR r IN
    SELECT l.id, l.charged_bytes + coalesce((
             SELECT sum(s.bytes) FROM usage_batch_lease_spend s JOIN usage_batches ub ON ub.id = s.batch_id
              WHERE s.lease_id = l.id AND ub.folded_at IS NULL), 0)::bigint AS spent
      FROM bandwidth_leases l
     WHERE l.id = ANY (v_ids)
     ORDER BY l.id
  LOOP
    IF lease_release(r.id, r.spent) THEN
      n := n + 1;
    END IF;
  END LOOP;
  RETURN n;
END $$;

-- Sticky sessions (docs/adr/0022): when a session started, so every gateway pod derives the same
-- exit for it until its lifetime runs out, and a new one afterwards. key is sha256 of
-- (account, plan, session id, targeting).
CREATE TABLE sticky_sessions (
  key bytea PRIMARY KEY CHECK (octet_length(key) = 32),
  started_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX sticky_sessions_expires_idx ON sticky_sessions (expires_at);
