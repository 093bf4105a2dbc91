-- The heartbeat of a gateway of the release before exits were reported (docs/adr/0117): kept
-- callable so such a gateway keeps beating while the new ones roll out; it reports no exits
-- (NULL). Drop it once no gateway of that release can run.
CREATE OR REPLACE FUNCTION gateway_heartbeat(p_gateway text, p_plan text, p_boot text)
RETURNS TABLE (out_live integer, out_was_dead boolean)
LANGUAGE sql AS $$ SELECT * FROM gateway_heartbeat_v2(p_gateway, p_plan, p_boot, NULL) $$;
