-- Proxy credentials changed (password reset, rename): the gateways' credential caches reload the account.
CREATE OR REPLACE FUNCTION change_log_proxy_credentials() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM change_log_record('proxy_credentials', OLD.account_id, OLD.username);
    RETURN OLD;
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.username <> NEW.username THEN
    PERFORM change_log_record('proxy_credentials', OLD.account_id, OLD.username);
  END IF;
  PERFORM change_log_record('proxy_credentials', NEW.account_id, NEW.username);
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER change_log_proxy_credentials AFTER INSERT OR DELETE OR UPDATE ON proxy_credentials
  FOR EACH ROW EXECUTE FUNCTION change_log_proxy_credentials();
