-- Billing as one room (docs/adr/0073, 0074, 0075): remaining = bought - used, crossings named by
-- their number, a credit limit for bill-later payment, and the tables its functions need. The
-- functions themselves are in migrations/functions/, one file each (re-applied by the migration
-- runner when they change); this migration drops what they replace.

-- Usage gateways report with their lease requests, before the worker folds it (billing_used): each
-- draw says how much its gateway has relayed on each of its open leases (reported_bytes, only
-- ever raised), and what is known to be used is the folded usage plus what open leases report and
-- the fold has not charged, never less than it once was (reported_used_bytes). give_back_at: when
-- the last denied draw asked other gateways to give back leased bytes (lease_give_back_request).
ALTER TABLE bandwidth_leases ADD COLUMN reported_bytes bigint NOT NULL DEFAULT 0 CHECK (reported_bytes >= 0);
ALTER TABLE balances
  ADD COLUMN reported_used_bytes bigint NOT NULL DEFAULT 0 CHECK (reported_used_bytes >= 0),
  ADD COLUMN give_back_at timestamptz;

-- Crossing state per balance and kind: armed until remaining falls below the threshold (one
-- crossing: one refill, one alert), re-armed when it rises above it again. Replaces
-- low_bandwidth_state, whose crossing numbers go on (they name the alerts' dedupe keys).
CREATE TABLE billing_crossings (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  kind text NOT NULL CHECK (kind IN ('auto_refill', 'low_bandwidth')),
  armed boolean NOT NULL DEFAULT true,
  crossings integer NOT NULL DEFAULT 0 CHECK (crossings >= 0),
  PRIMARY KEY (account_id, product, kind)
);
INSERT INTO billing_crossings (account_id, product, kind, armed, crossings)
SELECT account_id, product, 'low_bandwidth', armed, crossings FROM low_bandwidth_state;

-- A refill names its crossing by number now (idempotency key auto-refill:<product>:crossing:<n>),
-- not by the purchased total, which every refill changed. Older rows keep their keys.
ALTER TABLE auto_refills
  ADD COLUMN crossing integer CHECK (crossing > 0),
  ADD COLUMN remaining_bytes bigint;
ALTER TABLE auto_refills ALTER COLUMN created_at SET DEFAULT now();

-- How an invoice is paid: 'deferred' (billed later; counted against the credit limit) or
-- 'charged' (paid by payment_method before the bandwidth was granted).
ALTER TABLE invoices
  ADD COLUMN settlement text NOT NULL DEFAULT 'deferred' CHECK (settlement IN ('deferred', 'charged')),
  ADD COLUMN payment_method text NOT NULL DEFAULT 'invoice' CHECK (payment_method ~ '^[a-z][a-z0-9_-]{0,31}$');
UPDATE invoices i SET settlement = 'charged', payment_method = r.payment_method
  FROM auto_refills r WHERE r.purchase_id = i.purchase_id AND r.payment_method <> 'invoice';

-- Credit limit for bill-later payment, per account and calendar month (UTC), in cents of the price
-- table's currency: the account's own, else the default the worker writes here from
-- PROXYFLEET_CREDIT_LIMIT at start (as it writes product_prices).
CREATE TABLE billing_settings (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  credit_limit_cents bigint NOT NULL CHECK (credit_limit_cents >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO billing_settings (credit_limit_cents) VALUES (100000);
CREATE TABLE account_credit_limits (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  limit_cents bigint NOT NULL CHECK (limit_cents BETWEEN 0 AND 100000000000),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- The account view (GET /api/v1/account) shows the limit: its caches hear of a change.
-- trigger change_log_account_credit_limits: created with its function, migrations/functions/change_log_account_settings.sql (docs/adr/0084).

-- The low-bandwidth alert's optional floor: it also fires when remaining falls to this many bytes.
ALTER TABLE alert_settings ADD COLUMN low_bandwidth_floor_bytes bigint CHECK (low_bandwidth_floor_bytes > 0);

-- The billing clock for tests (billing_now): empty in production.
CREATE TABLE billing_clock (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  offset_interval interval NOT NULL
);

-- An account's emails (the delete of an account cascades to them; the billing checks read them).
CREATE INDEX email_outbox_account_idx ON email_outbox (account_id, id);

-- A denied draw asks other gateways to give back what their leases hold and they do not need.
ALTER TABLE change_log DROP CONSTRAINT change_log_kind_check,
  ADD CONSTRAINT change_log_kind_check
  CHECK (kind IN ('api_key', 'proxy_credentials', 'account', 'balance', 'isp_proxy', 'give_back'));

-- Replaced by functions/: the draw's trigger and its check (billing_on_draw, called by
-- lease_acquire; billing_check), the sweep (billing_sweep_due, billing_sweep_one), the re-arm
-- trigger (billing_rearm), and two functions whose signatures grow (lease_acquire: p_spent;
-- purchase_record: p_settlement, p_method).
-- IF EXISTS: a database migrated since 0060 was trimmed never had them (docs/adr/0088).
DROP TRIGGER IF EXISTS balance_check_on_draw ON balances;
DROP FUNCTION IF EXISTS balance_check_on_draw();
DROP FUNCTION IF EXISTS balance_check(uuid, text);
DROP FUNCTION IF EXISTS balance_sweep(integer);
DROP TRIGGER IF EXISTS low_bandwidth_rearm ON balances;
DROP FUNCTION IF EXISTS low_bandwidth_rearm();
DROP TABLE low_bandwidth_state;
DROP FUNCTION IF EXISTS lease_acquire(uuid, text, text, bigint, bigint, integer, uuid);
DROP FUNCTION IF EXISTS purchase_record(uuid, text, bigint, text, text);
