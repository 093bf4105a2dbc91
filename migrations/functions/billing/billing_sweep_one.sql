-- Decides on one balance the sweep found (billing_sweep_due), as a draw that found nothing free
-- would: locks the row, then billing_check. One transaction per balance, so the account's credit
-- lock is never held while another balance row is waited for.
CREATE OR REPLACE FUNCTION billing_sweep_one(p_account uuid, p_product text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM balances WHERE account_id = p_account AND product = p_product FOR UPDATE;
  IF FOUND THEN
    PERFORM billing_check(p_account, p_product, 0, 1);
  END IF;
END $$;
