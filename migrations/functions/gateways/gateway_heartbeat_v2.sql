-- One heartbeat, with the health of the gateway's exits (migrations/0175, docs/adr/0117; NULL:
-- none reported). out_was_dead: the row was gone or older than gateway_dead_after() (the gateway
-- was cut off from the database), so its leases may have been reclaimed meanwhile.
-- out_live: gateways of the plan whose heartbeat is fresh, this one included.
CREATE OR REPLACE FUNCTION gateway_heartbeat_v2(p_gateway text, p_plan text, p_boot text, p_exits jsonb)
RETURNS TABLE (out_live integer, out_was_dead boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_was_dead boolean;
BEGIN
  SELECT h.beat_at < now() - gateway_dead_after() INTO v_was_dead
    FROM gateway_heartbeats h WHERE h.gateway_id = p_gateway;
  INSERT INTO gateway_heartbeats AS h (gateway_id, plan, boot_id, exits) VALUES (p_gateway, p_plan, p_boot, p_exits)
  ON CONFLICT (gateway_id) DO UPDATE
     SET plan = EXCLUDED.plan, boot_id = EXCLUDED.boot_id, beat_at = now(), exits = EXCLUDED.exits;
  RETURN QUERY SELECT
    (SELECT count(*)::integer FROM gateway_heartbeats h WHERE h.plan = p_plan AND h.beat_at >= now() - gateway_dead_after()),
    coalesce(v_was_dead, true);
END $$;
