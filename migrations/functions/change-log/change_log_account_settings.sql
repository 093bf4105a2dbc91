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
CREATE OR REPLACE TRIGGER change_log_alert_settings AFTER UPDATE ON alert_settings
  FOR EACH ROW EXECUTE FUNCTION change_log_account_settings();
CREATE OR REPLACE TRIGGER change_log_auto_refill_settings AFTER INSERT OR UPDATE OR DELETE ON auto_refill_settings
  FOR EACH ROW EXECUTE FUNCTION change_log_account_settings();
CREATE OR REPLACE TRIGGER change_log_account_throttles AFTER INSERT OR UPDATE OR DELETE ON account_throttles
  FOR EACH ROW EXECUTE FUNCTION change_log_account_settings();
CREATE OR REPLACE TRIGGER change_log_ip_allowlist AFTER INSERT OR UPDATE OR DELETE ON ip_allowlist
  FOR EACH ROW EXECUTE FUNCTION change_log_account_settings();
CREATE OR REPLACE TRIGGER change_log_sub_users AFTER INSERT OR UPDATE OR DELETE ON sub_users
  FOR EACH ROW EXECUTE FUNCTION change_log_account_settings();
CREATE OR REPLACE TRIGGER change_log_account_credit_limits AFTER INSERT OR UPDATE OR DELETE ON account_credit_limits
  FOR EACH ROW EXECUTE FUNCTION change_log_account_settings();
