-- A draw was denied while leases hold bytes of the balance: when other gateways' open leases hold
-- unspent bytes, they are asked through the change feed (a 'give_back' change, subject the product)
-- to give back what they do not need (docs/adr/0073). At most once a second per balance, so a
-- denied customer's retries do not flood change_log (NOTIFY takes a global lock at commit). The
-- caller holds the balance row lock. Returns whether other gateways hold such bytes (then the
-- denied gateway may wait for them).
CREATE OR REPLACE FUNCTION lease_give_back_request(p_account uuid, p_product text, p_gateway text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM bandwidth_leases l
                  WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL
                    AND l.gateway_id <> p_gateway AND l.granted_bytes > l.charged_bytes) THEN
    RETURN false;
  END IF;
  UPDATE balances SET give_back_at = now()
   WHERE account_id = p_account AND product = p_product
     AND (give_back_at IS NULL OR give_back_at < now() - interval '1 second');
  IF FOUND THEN
    PERFORM change_log_record('give_back', p_account, p_product);
  END IF;
  RETURN true;
END $$;
