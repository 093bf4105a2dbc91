-- Change log for cache invalidation (docs/adr/0005): every change a cache must see is written to
-- change_log by a trigger in the writer's transaction and announced with NOTIFY proxyfleet_changes
-- carrying the row id (delivered on commit). A pod that lost its LISTEN connection catches up by
-- reading the rows after the last id it applied.
CREATE OR REPLACE FUNCTION change_log_record(p_kind text, p_account uuid, p_subject text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  new_id bigint;
BEGIN
  INSERT INTO change_log (kind, account_id, subject) VALUES (p_kind, p_account, p_subject)
  RETURNING id INTO new_id;
  PERFORM pg_notify('proxyfleet_changes', new_id::text);
END $$;
