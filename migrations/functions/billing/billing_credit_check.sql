-- Whether a bill-later amount fits in the account's credit limit this month, decided under the
-- account's credit lock (kept until the caller's transaction ends, so the invoice the caller
-- records next is counted by anyone deciding after it): NULL when it fits, else why not.
CREATE OR REPLACE FUNCTION billing_credit_check(p_account uuid, p_amount_cents bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  c record;
BEGIN
  PERFORM billing_credit_lock(p_account);
  SELECT * INTO c FROM credit_status(p_account);
  RETURN billing_credit_reason(c.limit_cents, c.used_cents, p_amount_cents, c.currency);
END $$;
