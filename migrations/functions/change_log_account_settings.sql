-- The account view (GET /api/v1/account) is cached by API processes; alert and auto-refill
-- settings changes must reach every cache. They are announced as an 'account' change carrying the
-- account's current status, so consumers that read the subject as the status see a correct value.
CREATE OR REPLACE FUNCTION change_log_account_settings() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  acct uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.account_id ELSE NEW.account_id END;
BEGIN
  PERFORM change_log_record('account', acct, (SELECT status FROM accounts WHERE id = acct));
  RETURN NULL;
END $$;
