-- An account's status changed (suspended, reactivated): every cache of it reloads.
CREATE OR REPLACE FUNCTION change_log_accounts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM change_log_record('account', NEW.id, NEW.status);
  RETURN NEW;
END $$;
