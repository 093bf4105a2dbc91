-- A purchase's idempotency key is the caller's, scoped to its account: the same key on two
-- accounts is two purchases (it was unique across all accounts, so a reused key on account B
-- returned account A's invoice and bought nothing).
ALTER TABLE purchases DROP CONSTRAINT purchases_idempotency_key_key;
CREATE UNIQUE INDEX purchases_account_idempotency_key ON purchases (account_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
