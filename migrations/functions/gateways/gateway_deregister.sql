-- A clean shutdown, after the gateway's final flush: whatever lease that flush could not return
-- is reclaimed now (as for a crash), and the row goes. Left alone when another process has taken
-- the id meanwhile (its leases are its own).
CREATE OR REPLACE FUNCTION gateway_deregister(p_gateway text, p_boot text) RETURNS integer
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
