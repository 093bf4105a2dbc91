-- Takes the free bytes of a balance's stripes back to the balance row (docs/adr/0107), for a caller
-- that holds the balance row lock and needs every free byte in view: a draw on the balance row
-- that finds too little there (near zero the stripes must not keep a customer's last bytes from
-- it), the fold when spends past their leases left less than the stripes hold, and a refund that
-- takes back what is unused. It waits for the stripes (each held only by
-- one draw, release or re-levelling, none of which waits for a balance row). Lock order: the
-- balance row (held), then its stripes by number. Returns the bytes taken back.
CREATE OR REPLACE FUNCTION balance_stripes_drain(p_account uuid, p_product text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_back bigint := 0;
BEGIN
  -- FOR UPDATE returns each row as locked (a release committed meanwhile is counted).
  FOR r IN
    SELECT x.stripe, x.free_bytes FROM balance_stripes x
     WHERE x.account_id = p_account AND x.product = p_product AND x.free_bytes > 0
     ORDER BY x.stripe FOR UPDATE
  LOOP
    UPDATE balance_stripes SET free_bytes = 0 WHERE account_id = p_account AND product = p_product AND stripe = r.stripe;
    v_back := v_back + r.free_bytes;
  END LOOP;
  IF v_back > 0 THEN
    UPDATE balances SET striped_bytes = striped_bytes - v_back WHERE account_id = p_account AND product = p_product;
  END IF;
  RETURN v_back;
END $$;
