-- Billing, finished (docs/adr/0040, 0041): prices, purchases through one SQL function, auto-refill
-- and the low-bandwidth alert decided where the balance is decided (when a gateway draws a lease),
-- and emails rendered by the worker when they are sent.

-- Price per GB per product; the worker writes its configuration here at start
-- (PROXYFLEET_PRICES_PER_GB), these are the documented defaults. Invoices keep the amount they
-- were issued with.
CREATE TABLE product_prices (
  product text PRIMARY KEY REFERENCES products (name),
  cents_per_gb numeric NOT NULL CHECK (cents_per_gb >= 0),
  currency text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO product_prices (product, cents_per_gb) VALUES
  ('light', 100), ('basic', 200), ('advanced', 300), ('mobile', 800), ('datacenter', 50);

-- Which payment method pays an account's refills of a product ("invoice": bill later, built in).
ALTER TABLE auto_refill_settings
  ADD COLUMN payment_method text NOT NULL DEFAULT 'invoice' CHECK (payment_method ~ '^[a-z][a-z0-9_-]{0,31}$');
-- Older rows may break it; new writes may not (the API validates too).
ALTER TABLE auto_refill_settings
  ADD CONSTRAINT auto_refill_threshold_below_refill CHECK (threshold_bytes < refill_bytes) NOT VALID;

-- One row per crossing of an auto-refill threshold: idempotency_key names the crossing (the
-- product and the purchased level total_bytes at which it was crossed), so concurrent draws of
-- several gateways, a re-run sweep and a worker killed mid-refill all come to one refill.
CREATE TABLE auto_refills (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  idempotency_key text NOT NULL,
  bytes bigint NOT NULL CHECK (bytes > 0),
  payment_method text NOT NULL,
  -- pending: a method that must charge before the bandwidth is granted (the worker runs it).
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  purchase_id uuid REFERENCES purchases (id) ON DELETE SET NULL,
  error text,
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  decided_at timestamptz,
  UNIQUE (account_id, idempotency_key)
);
CREATE INDEX auto_refills_month_idx ON auto_refills (account_id, product, created_at);
CREATE INDEX auto_refills_pending_idx ON auto_refills (next_attempt_at) WHERE status = 'pending';

-- Low-bandwidth alert state per balance: armed until a crossing sends the alert, re-armed when a
-- purchase lifts the remaining bandwidth back above the threshold.
CREATE TABLE low_bandwidth_state (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  armed boolean NOT NULL DEFAULT true,
  crossings integer NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, product)
);

-- Emails whose text the worker renders when it sends them, from payload and the state of that
-- moment (so subject and body agree, and an alert that no longer holds is dropped).
ALTER TABLE email_outbox ALTER COLUMN subject DROP NOT NULL, ALTER COLUMN body_text DROP NOT NULL,
  ADD COLUMN payload jsonb,
  ADD CONSTRAINT email_outbox_text_or_payload CHECK ((subject IS NOT NULL AND body_text IS NOT NULL) OR payload IS NOT NULL);
ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_kind_check,
  ADD CONSTRAINT email_outbox_kind_check CHECK (kind IN ('low_bandwidth', 'new_invoice', 'server_alert', 'auto_refill_failed'));
ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_status_check,
  ADD CONSTRAINT email_outbox_status_check CHECK (status IN ('pending', 'sent', 'failed', 'dropped'));

-- purchase_record(): created here at first; its one definition is migrations/functions/billing/purchase_record.sql (docs/adr/0084).

-- low_bandwidth_rearm() and its trigger, balance_check(), balance_check_on_draw() and its trigger,
-- balance_sweep(): created here at first and dropped for good by 0090 (replaced by billing_rearm,
-- billing_check, billing_on_draw, billing_sweep_due and billing_sweep_one in
-- migrations/functions/billing/); removed from this file (docs/adr/0084, docs/adr/0088).
