-- The health of each gateway's exits, carried by its heartbeat (docs/adr/0117): the operator reads
-- the fresh rows of a ProxyGateway's pods into its status (exits, exitsReady, ExitAddressMissing).
-- One element per exit of the gateway's spec, keys kept short since every pod writes it every 5 s:
--   {"n": name, "s": "ok" | "failing" | "missing", "ls": last success, "lf": last failure
--    (epoch seconds), "cf": consecutive failures, "e": last error code}
-- with ls, lf, cf and e left out while zero or empty. Written by gateway_heartbeat_v2 in the
-- heartbeat's one statement. NULL: a gateway of an earlier release, which calls gateway_heartbeat
-- and reports no exits; it keeps working as before.
ALTER TABLE gateway_heartbeats ADD COLUMN exits jsonb
  CONSTRAINT gateway_heartbeats_exits_array CHECK (exits IS NULL OR jsonb_typeof(exits) = 'array');
