-- Only purchases (total_bytes) are announced: folding usage updates used_bytes constantly and
-- NOTIFY takes a global lock at commit, so the ingest path must stay silent.
CREATE OR REPLACE FUNCTION change_log_balances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM change_log_record('balance', NEW.account_id, NEW.product);
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER change_log_balances_insert AFTER INSERT ON balances
  FOR EACH ROW EXECUTE FUNCTION change_log_balances();
CREATE OR REPLACE TRIGGER change_log_balances_update AFTER UPDATE OF total_bytes ON balances
  FOR EACH ROW WHEN (OLD.total_bytes IS DISTINCT FROM NEW.total_bytes) EXECUTE FUNCTION change_log_balances();
