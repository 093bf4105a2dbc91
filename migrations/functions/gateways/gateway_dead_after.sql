-- The one definition of "dead": gateway/src/accounting/heartbeat.ts reads it too.
CREATE OR REPLACE FUNCTION gateway_dead_after() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '30 seconds' $$;
