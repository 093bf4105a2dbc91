-- At most 10 active named keys per account, also under concurrent inserts: the trigger takes the
-- account row lock first, so two transactions adding the 10th and 11th key serialise.
CREATE OR REPLACE FUNCTION api_keys_named_limit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  active integer;
BEGIN
  IF NEW.kind <> 'named' OR NEW.revoked_at IS NOT NULL THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.kind = 'named' AND OLD.revoked_at IS NULL THEN
    RETURN NEW;
  END IF;
  PERFORM 1 FROM accounts WHERE id = NEW.account_id FOR UPDATE;
  SELECT count(*) INTO active FROM api_keys
   WHERE account_id = NEW.account_id AND kind = 'named' AND revoked_at IS NULL AND id <> NEW.id;
  IF active >= 10 THEN
    RAISE EXCEPTION 'account % already has 10 active named API keys', NEW.account_id
      USING ERRCODE = 'PF001';
  END IF;
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER api_keys_named_limit BEFORE INSERT OR UPDATE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION api_keys_named_limit();
