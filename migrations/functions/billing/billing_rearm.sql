-- A purchase (or a refill) raised a balance's total: its crossings are re-armed where remaining is
-- above their thresholds again (billing_rearm_balance). The purchase holds the balance row lock.
CREATE OR REPLACE FUNCTION billing_rearm() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM billing_rearm_balance(NEW.account_id, NEW.product);
  RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER billing_rearm AFTER UPDATE OF total_bytes ON balances
  FOR EACH ROW WHEN (NEW.total_bytes > OLD.total_bytes) EXECUTE FUNCTION billing_rearm();
