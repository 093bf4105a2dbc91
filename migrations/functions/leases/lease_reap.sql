-- The worker's reaper (every 10 s): expired leases, and the leases of dead gateways (docs/adr/0025).
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
