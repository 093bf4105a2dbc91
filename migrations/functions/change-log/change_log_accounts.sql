-- An account's status changed (suspended, reactivated): every cache of it reloads.
CREATE OR REPLACE FUNCTION change_log_accounts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM change_log_record('account', NEW.id, NEW.status);
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER change_log_accounts AFTER UPDATE OF status ON accounts
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION change_log_accounts();
