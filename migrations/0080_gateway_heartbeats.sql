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

-- lease_reap: changed here when this migration was written; its one definition is now migrations/functions/lease_reap.sql (docs/adr/0074), so the restatement is gone.

-- lease_acquire: changed here when this migration was written; its one definition is now migrations/functions/lease_acquire.sql (docs/adr/0074), so the restatement is gone.

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
