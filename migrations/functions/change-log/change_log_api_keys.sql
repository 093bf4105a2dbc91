-- An API key issued, revoked or deleted: the key caches drop it by its hash (docs/adr/0010).
CREATE OR REPLACE FUNCTION change_log_api_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM change_log_record('api_key', OLD.account_id, encode(OLD.key_hash, 'hex'));
    RETURN OLD;
  END IF;
  PERFORM change_log_record('api_key', NEW.account_id, encode(NEW.key_hash, 'hex'));
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER change_log_api_keys AFTER INSERT OR DELETE OR UPDATE OF revoked_at, key_hash ON api_keys
  FOR EACH ROW EXECUTE FUNCTION change_log_api_keys();
