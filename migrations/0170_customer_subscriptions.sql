-- Customers subscribe themselves (POST /api/v1/subscriptions, the Billing page's "Subscribe";
-- docs/adr/0114). The request's Idempotency-Key, and the request it was sent with, are kept on
-- the subscription it created: the same key again answers that subscription (the same request)
-- or is refused (another request), at once or later. Operators' subscriptions have neither.
ALTER TABLE subscriptions ADD COLUMN idempotency_key text CHECK (length(idempotency_key) BETWEEN 1 AND 200),
  ADD COLUMN idempotency_request jsonb,
  ADD CHECK ((idempotency_key IS NULL) = (idempotency_request IS NULL));
CREATE UNIQUE INDEX subscriptions_idempotency_idx ON subscriptions (account_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
