-- Usernames are unique across accounts' proxy credentials and sub-users. Checked under a
-- transaction-scoped advisory lock on the name, so two concurrent writers of the same name in the
-- two tables cannot both pass.
CREATE OR REPLACE FUNCTION proxy_username_free() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('proxy_username'), hashtext(NEW.username));
  IF (TG_TABLE_NAME = 'sub_users' AND EXISTS (SELECT 1 FROM proxy_credentials c WHERE c.username = NEW.username))
     OR (TG_TABLE_NAME = 'proxy_credentials' AND EXISTS (SELECT 1 FROM sub_users s WHERE s.username = NEW.username)) THEN
    RAISE EXCEPTION 'proxy username % is taken', NEW.username
      USING ERRCODE = 'unique_violation', CONSTRAINT = 'proxy_username_taken';
  END IF;
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER sub_users_username_free BEFORE INSERT OR UPDATE OF username ON sub_users
  FOR EACH ROW EXECUTE FUNCTION proxy_username_free();
CREATE OR REPLACE TRIGGER proxy_credentials_username_free BEFORE INSERT OR UPDATE OF username ON proxy_credentials
  FOR EACH ROW EXECUTE FUNCTION proxy_username_free();
