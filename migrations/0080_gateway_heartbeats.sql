-- Gateway heartbeats (docs/adr/0025): every gateway writes its row every few seconds; the leases
-- of a gateway whose row is older than gateway_dead_after() are reclaimed by whoever notices
-- first (lease_acquire for the balance it draws from, the worker's lease_reap for all of them),
-- instead of blocking the customer until the lease's TTL (300 s) runs out.
--
-- A gateway with no row (an older version, or a process that does not heartbeat) is never judged
-- dead: its leases still come back through their TTL only.
CREATE TABLE gateway_heartbeats (
  gateway_id text PRIMARY KEY CHECK (length(gateway_id) BETWEEN 1 AND 253),
  plan text NOT NULL REFERENCES products (name),
  -- The process behind the id: a restarted pod keeps its name but is a new process.
  boot_id text NOT NULL CHECK (length(boot_id) BETWEEN 1 AND 64),
  started_at timestamptz NOT NULL DEFAULT now(),
  beat_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gateway_heartbeats_plan_beat_idx ON gateway_heartbeats (plan, beat_at);
CREATE INDEX bandwidth_leases_gateway_idx ON bandwidth_leases (gateway_id) WHERE released_at IS NULL;

-- The one definition of "dead": gateway/src/accounting/heartbeat.ts reads it too.
CREATE FUNCTION gateway_dead_after() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '30 seconds' $$;

-- Releases open leases whose gateway can no longer report on them, as lease_reap always did for
-- expired ones: spent = charged + the spends of its flushed, unfolded batches (what the gateway
-- flushed is all the database knows; docs/adr/0025 says what that loses). The caller holds the
-- lease rows locked (by id: the lock order of usage_record and usage_fold); this locks their
-- balances, in order, before lease_release writes them. Released leases are skipped, so a lease
-- reclaimed twice, or released by its gateway meanwhile, is returned once.
CREATE FUNCTION lease_reclaim(p_ids uuid[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  PERFORM 1 FROM balances b
   WHERE (b.account_id, b.product) IN (SELECT l.account_id, l.product FROM bandwidth_leases l WHERE l.id = ANY (p_ids))
   ORDER BY b.account_id, b.product FOR UPDATE;
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

-- The worker's reaper (every 10 s): expired leases, and now also the leases of dead gateways.
CREATE OR REPLACE FUNCTION lease_reap(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_ids uuid[];
BEGIN
  SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
    SELECT l.id FROM bandwidth_leases l
     WHERE l.released_at IS NULL
       AND (l.expires_at < now()
            OR l.gateway_id IN (SELECT h.gateway_id FROM gateway_heartbeats h WHERE h.beat_at < now() - gateway_dead_after()))
     ORDER BY l.id LIMIT p_limit FOR UPDATE OF l) x;
  IF v_ids IS NULL THEN
    RETURN 0;
  END IF;
  RETURN lease_reclaim(v_ids);
END $$;

-- As in 0020, after first reclaiming the leases of dead gateways on this balance: a customer whose
-- gateway crashed holding most of the balance is served by the next gateway that asks once the
-- crashed one's heartbeat is gateway_dead_after() old. Lease rows are locked before the balance
-- row (the order of usage_record and usage_fold).
CREATE OR REPLACE FUNCTION lease_acquire(p_account uuid, p_product text, p_gateway text, p_wanted bigint, p_min bigint, p_ttl_seconds integer)
RETURNS TABLE (out_lease_id uuid, out_granted bigint, out_expires_at timestamptz, out_free bigint, out_held bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_free bigint;
  v_held bigint;
  v_pods integer;
  v_grant bigint;
  v_id uuid;
  v_expires timestamptz;
  v_dead uuid[];
BEGIN
  SELECT array_agg(x.id ORDER BY x.id) INTO v_dead FROM (
    SELECT l.id FROM bandwidth_leases l JOIN gateway_heartbeats h ON h.gateway_id = l.gateway_id
     WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL
       AND h.beat_at < now() - gateway_dead_after()
     ORDER BY l.id FOR UPDATE OF l) x;
  IF v_dead IS NOT NULL THEN
    PERFORM lease_reclaim(v_dead);
  END IF;

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

-- A gateway process starts: any lease still open under its id belongs to an earlier process of
-- that id (a pod whose container restarted keeps its name; this process has drawn nothing yet),
-- so it is reclaimed now rather than when the TTL runs out. out_other_alive: a row with another
-- boot id was still fresh, i.e. two live processes may share this id (a misconfiguration: each
-- start then reclaims the other's leases).
CREATE FUNCTION gateway_register(p_gateway text, p_plan text, p_boot text)
RETURNS TABLE (out_reclaimed integer, out_other_alive boolean, out_live integer)
LANGUAGE plpgsql AS $$
DECLARE
  v_ids uuid[];
  v_reclaimed integer := 0;
  v_other_alive boolean;
BEGIN
  SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
    SELECT l.id FROM bandwidth_leases l WHERE l.gateway_id = p_gateway AND l.released_at IS NULL
     ORDER BY l.id FOR UPDATE) x;
  IF v_ids IS NOT NULL THEN
    v_reclaimed := lease_reclaim(v_ids);
  END IF;
  SELECT h.boot_id <> p_boot AND h.beat_at >= now() - gateway_dead_after() INTO v_other_alive
    FROM gateway_heartbeats h WHERE h.gateway_id = p_gateway;
  INSERT INTO gateway_heartbeats AS h (gateway_id, plan, boot_id) VALUES (p_gateway, p_plan, p_boot)
  ON CONFLICT (gateway_id) DO UPDATE
     SET plan = EXCLUDED.plan, boot_id = EXCLUDED.boot_id, started_at = now(), beat_at = now();
  RETURN QUERY SELECT v_reclaimed, coalesce(v_other_alive, false),
    (SELECT count(*)::integer FROM gateway_heartbeats h WHERE h.plan = p_plan AND h.beat_at >= now() - gateway_dead_after());
END $$;

-- One heartbeat. out_was_dead: the row was gone or older than gateway_dead_after() (the gateway
-- was cut off from the database), so its leases may have been reclaimed meanwhile.
-- out_live: gateways of the plan whose heartbeat is fresh, this one included.
CREATE FUNCTION gateway_heartbeat(p_gateway text, p_plan text, p_boot text)
RETURNS TABLE (out_live integer, out_was_dead boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_was_dead boolean;
BEGIN
  SELECT h.beat_at < now() - gateway_dead_after() INTO v_was_dead
    FROM gateway_heartbeats h WHERE h.gateway_id = p_gateway;
  INSERT INTO gateway_heartbeats AS h (gateway_id, plan, boot_id) VALUES (p_gateway, p_plan, p_boot)
  ON CONFLICT (gateway_id) DO UPDATE SET plan = EXCLUDED.plan, boot_id = EXCLUDED.boot_id, beat_at = now();
  RETURN QUERY SELECT
    (SELECT count(*)::integer FROM gateway_heartbeats h WHERE h.plan = p_plan AND h.beat_at >= now() - gateway_dead_after()),
    coalesce(v_was_dead, true);
END $$;

-- A clean shutdown, after the gateway's final flush: whatever lease that flush could not return
-- is reclaimed now (as for a crash), and the row goes. Left alone when another process has taken
-- the id meanwhile (its leases are its own).
CREATE FUNCTION gateway_deregister(p_gateway text, p_boot text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_ids uuid[];
  v_reclaimed integer := 0;
BEGIN
  IF EXISTS (SELECT 1 FROM gateway_heartbeats h WHERE h.gateway_id = p_gateway AND h.boot_id <> p_boot) THEN
    RETURN 0;
  END IF;
  SELECT array_agg(x.id ORDER BY x.id) INTO v_ids FROM (
    SELECT l.id FROM bandwidth_leases l WHERE l.gateway_id = p_gateway AND l.released_at IS NULL
     ORDER BY l.id FOR UPDATE) x;
  IF v_ids IS NOT NULL THEN
    v_reclaimed := lease_reclaim(v_ids);
  END IF;
  DELETE FROM gateway_heartbeats h WHERE h.gateway_id = p_gateway AND h.boot_id = p_boot;
  RETURN v_reclaimed;
END $$;
