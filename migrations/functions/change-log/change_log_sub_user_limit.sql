-- A limit set, raised, lowered or removed is announced as a 'balance' change of the account (as a
-- purchase is): gateways forget a denial and ask again. used_bytes moving (every fold) is not.
CREATE OR REPLACE FUNCTION change_log_sub_user_limit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.limit_bytes IS NOT NULL THEN
      PERFORM change_log_record('balance', OLD.account_id, NULL);
    END IF;
  ELSIF TG_OP = 'INSERT' AND NEW.limit_bytes IS NOT NULL
     OR TG_OP = 'UPDATE' AND NEW.limit_bytes IS DISTINCT FROM OLD.limit_bytes THEN
    PERFORM change_log_record('balance', NEW.account_id, NULL);
  END IF;
  RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER change_log_sub_user_products AFTER INSERT OR UPDATE OR DELETE ON sub_user_products
  FOR EACH ROW EXECUTE FUNCTION change_log_sub_user_limit();
