-- Auto-refill or alert settings changed: a lower threshold, percent or floor can put remaining
-- above it again, so the crossings of the account's balances (of that product, for auto-refill)
-- are re-armed where it is (billing_rearm_balance). The balance rows are locked first, in product
-- order, so a draw deciding on the same balance is waited for. Whether the new settings make a
-- crossing now is decided by the next draw, fold or sweep (within 5 s), not here: a settings
-- write never buys.
CREATE OR REPLACE FUNCTION billing_settings_rearm() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_only text;
  r record;
BEGIN
  IF TG_TABLE_NAME = 'auto_refill_settings' THEN
    v_only := NEW.product;
  END IF;
  FOR r IN
    SELECT b.product FROM balances b
     WHERE b.account_id = NEW.account_id AND (v_only IS NULL OR b.product = v_only)
     ORDER BY b.product FOR UPDATE
  LOOP
    PERFORM billing_rearm_balance(NEW.account_id, r.product);
  END LOOP;
  RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER billing_settings_rearm AFTER INSERT OR UPDATE ON auto_refill_settings
  FOR EACH ROW EXECUTE FUNCTION billing_settings_rearm();
CREATE OR REPLACE TRIGGER billing_settings_rearm AFTER UPDATE ON alert_settings
  FOR EACH ROW EXECUTE FUNCTION billing_settings_rearm();
