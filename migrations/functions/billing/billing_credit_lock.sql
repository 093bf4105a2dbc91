-- Bill-later invoices of one account take turns (a transaction-scoped advisory lock: no session
-- state, so it holds under PgBouncer's transaction pooling), so two refills of two products cannot
-- both pass the credit limit, and an operator's purchase is counted by a refill deciding at the
-- same moment. Lock order: balance rows first (draws, folds and purchases hold theirs), then this.
CREATE OR REPLACE FUNCTION billing_credit_lock(p_account uuid) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(hashtext('billing_credit'), hashtext(p_account::text))
$$;
