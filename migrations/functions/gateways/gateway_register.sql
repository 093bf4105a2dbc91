-- A gateway process starts: any lease still open under its id belongs to an earlier process of
-- that id (a pod whose container restarted keeps its name; this process has drawn nothing yet),
-- so it is reclaimed now rather than when the TTL runs out. out_other_alive: a row with another
-- boot id was still fresh, i.e. two live processes may share this id (a misconfiguration: each
-- start then reclaims the other's leases). The exits an earlier process reported are cleared:
-- this one reports its own with its first beat (docs/adr/0117).
CREATE OR REPLACE FUNCTION gateway_register(p_gateway text, p_plan text, p_boot text)
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
     SET plan = EXCLUDED.plan, boot_id = EXCLUDED.boot_id, started_at = now(), beat_at = now(), exits = NULL;
  RETURN QUERY SELECT v_reclaimed, coalesce(v_other_alive, false),
    (SELECT count(*)::integer FROM gateway_heartbeats h WHERE h.plan = p_plan AND h.beat_at >= now() - gateway_dead_after());
END $$;
