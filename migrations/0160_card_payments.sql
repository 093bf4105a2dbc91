-- Card payments through Stripe (docs/billing.md "Cards", docs/adr/0110). A customer saves a card
-- on Stripe's hosted page (a Checkout Session in setup mode); Stripe keeps the card, we keep its
-- customer and payment method ids. A card purchase is a card_payments row committed BEFORE Stripe is
-- asked (so a webhook always finds it); it buys nothing until Stripe says the payment succeeded
-- (the webhook, or the PaymentIntent's own answer), and then buys through purchase_record once:
-- the row's purchase_id is set in the same transaction.
CREATE TABLE stripe_customers (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  customer_id text NOT NULL UNIQUE,
  -- The saved card (setup_intent.succeeded); NULL until the customer saved one.
  payment_method_id text,
  card_label text,
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE card_payments (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  -- The purchase's key, prefixed as purchases' are ("customer:<Idempotency-Key>"); Stripe's
  -- idempotency key for the PaymentIntent, and the key the purchase is recorded under.
  idempotency_key text NOT NULL,
  product text NOT NULL REFERENCES products (name),
  bytes bigint NOT NULL CHECK (bytes > 0),
  amount_cents bigint NOT NULL CHECK (amount_cents > 0),
  currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  -- creating: Stripe not (yet) answered; requires_action: 3-D Secure waits for the customer;
  -- processing: Stripe answered, no outcome yet; succeeded (final, bought); failed; canceled.
  status text NOT NULL DEFAULT 'creating'
    CHECK (status IN ('creating', 'requires_action', 'processing', 'succeeded', 'failed', 'canceled')),
  payment_intent_id text UNIQUE,
  -- Where the customer confirms a 3-D Secure payment (the PaymentIntent's next_action).
  action_url text,
  failure text,
  purchase_id uuid UNIQUE REFERENCES purchases (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, idempotency_key),
  CHECK ((status = 'succeeded') = (purchase_id IS NOT NULL))
);
-- The daily limit counts card payments still open, besides the purchases made.
CREATE INDEX card_payments_open_idx ON card_payments (account_id, created_at)
  WHERE status IN ('creating', 'requires_action', 'processing');

-- Webhook events applied, by Stripe's event id: a duplicate delivery changes nothing.
CREATE TABLE stripe_events (
  id text PRIMARY KEY,
  type text NOT NULL,
  -- What it did: 'applied', or why not ('ignored: ...').
  outcome text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);

-- Refunds and disputes of card-paid invoices (cumulative, as Stripe reports them: amount_refunded
-- and a dispute's amount only grow, so the largest seen is the truth whatever order events came in).
ALTER TABLE invoices
  ADD COLUMN refunded_cents bigint NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0),
  ADD COLUMN disputed_cents bigint NOT NULL DEFAULT 0 CHECK (disputed_cents >= 0),
  -- Bytes taken back by refunds and disputes (the unused part, at most what the invoice bought).
  ADD COLUMN refund_taken_bytes bigint NOT NULL DEFAULT 0 CHECK (refund_taken_bytes >= 0),
  ADD COLUMN refunded_at timestamptz;
ALTER TABLE invoices DROP CONSTRAINT invoices_status_check,
  ADD CONSTRAINT invoices_status_check CHECK (status IN ('issued', 'paid', 'void', 'refunded'));
ALTER TABLE invoices DROP CONSTRAINT invoices_settled_at,
  ADD CONSTRAINT invoices_settled_at CHECK (
    (status = 'issued' AND paid_at IS NULL AND voided_at IS NULL)
    OR (status = 'paid' AND paid_at IS NOT NULL AND voided_at IS NULL)
    OR (status = 'void' AND voided_at IS NOT NULL AND paid_at IS NULL)
    OR (status = 'refunded' AND paid_at IS NOT NULL AND refunded_at IS NOT NULL));

-- The refund email, rendered by its producer (subject and body in the row).
DO $$
DECLARE
  def text;
  kinds text[];
BEGIN
  SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
   WHERE conrelid = 'email_outbox'::regclass AND conname = 'email_outbox_kind_check';
  SELECT coalesce(array_agg(DISTINCT m[1]), '{}') INTO kinds FROM regexp_matches(coalesce(def, ''), '[''{,]([a-z_]+)(?=[''},])', 'g') AS m;
  kinds := kinds || ARRAY['card_refund'];
  IF def IS NOT NULL THEN
    ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_kind_check;
  END IF;
  EXECUTE format('ALTER TABLE email_outbox ADD CONSTRAINT email_outbox_kind_check CHECK (kind = ANY (%L::text[]))', kinds);
END $$;
