-- Subscriptions (docs/billing.md, docs/adr/0080): ISP proxy rentals and bandwidth plans that renew
-- every month on the start day's anniversary, each renewal an invoice with source 'renewal'.
-- Functions (subscription_*) live in functions/, one per file.

-- ISP proxy prices per proxy and month, by country; the row '*' is the price for every other
-- country. Written by the worker from PROXYFLEET_ISP_PRICES (common/src/billing/prices.ts).
CREATE TABLE isp_proxy_prices (
  country text PRIMARY KEY CHECK (country = '*' OR country ~ '^[a-z]{2}$'),
  cents_per_month bigint NOT NULL CHECK (cents_per_month >= 0),
  currency text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO isp_proxy_prices (country, cents_per_month) VALUES ('*', 500);

CREATE TABLE subscriptions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('isp_proxy', 'bandwidth_plan')),
  -- ISP proxy rental: this many proxies of this country (the proxies point here: isp_proxies.subscription_id).
  country text CHECK (country ~ '^[a-z]{2}$'),
  proxy_count integer CHECK (proxy_count BETWEEN 1 AND 1000),
  -- Bandwidth plan: this many GB of this product every period.
  product text REFERENCES products (name),
  gb_per_period integer CHECK (gb_per_period BETWEEN 1 AND 100000),
  -- Periods start at started_at + n months (UTC; the day clamped to the month's last day,
  -- computed from started_at each time so 31 Jan -> 29 Feb -> 31 Mar): subscription_period_start.
  started_at timestamptz NOT NULL,
  -- Periods paid so far: the paid time is [started_at, period_start(periods_paid)).
  periods_paid integer NOT NULL DEFAULT 0 CHECK (periods_paid >= 0),
  paid_until timestamptz NOT NULL,
  -- When the next period is due (= paid_until while the subscription renews).
  next_renewal_at timestamptz NOT NULL,
  auto_renew boolean NOT NULL DEFAULT true,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'past_due', 'cancelled', 'expired')),
  past_due_since timestamptz,
  -- past_due: when it expires unless paid (the due time plus PROXYFLEET_SUBSCRIPTION_GRACE_DAYS).
  grace_ends_at timestamptz,
  -- Why the last renewal failed (payment refused, credit limit, account suspended).
  last_error text,
  payment_method text NOT NULL DEFAULT 'invoice',
  -- A failed renewal is tried again during grace, at most this often (subscription_renew).
  next_attempt_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'isp_proxy' AND country IS NOT NULL AND proxy_count IS NOT NULL AND product IS NULL AND gb_per_period IS NULL)
      OR (kind = 'bandwidth_plan' AND product IS NOT NULL AND gb_per_period IS NOT NULL AND country IS NULL AND proxy_count IS NULL))
);
CREATE INDEX subscriptions_account_idx ON subscriptions (account_id, created_at);
CREATE INDEX subscriptions_due_idx ON subscriptions (next_renewal_at) WHERE status IN ('active', 'past_due');

ALTER TABLE isp_proxies ADD COLUMN subscription_id uuid REFERENCES subscriptions (id) ON DELETE SET NULL;
CREATE INDEX isp_proxies_subscription_idx ON isp_proxies (subscription_id) WHERE subscription_id IS NOT NULL;

-- One row per subscription and period: the unique key is the renewal's idempotency key, so two
-- workers, a retried transaction or a clock step cannot bill a period twice.
CREATE TABLE subscription_renewals (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  subscription_id uuid NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  period integer NOT NULL CHECK (period >= 0),
  period_start timestamptz NOT NULL,
  period_end timestamptz NOT NULL,
  status text NOT NULL CHECK (status IN ('paid', 'failed')),
  amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
  currency text NOT NULL,
  invoice_id uuid,
  error text,
  attempts integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL,
  decided_at timestamptz NOT NULL,
  UNIQUE (subscription_id, period)
);

-- Invoices of renewals: a plan's renewal buys its GB (a purchase with source 'renewal'); an ISP
-- rental's renewal buys no bandwidth, so its invoice has no purchase, product or bytes.
ALTER TABLE purchases DROP CONSTRAINT purchases_source_check,
  ADD CONSTRAINT purchases_source_check CHECK (source IN ('admin', 'auto_refill', 'renewal'));
ALTER TABLE invoices ALTER COLUMN purchase_id DROP NOT NULL,
  ALTER COLUMN product DROP NOT NULL,
  ALTER COLUMN bytes DROP NOT NULL,
  ADD COLUMN subscription_id uuid REFERENCES subscriptions (id) ON DELETE SET NULL,
  ADD COLUMN description text;
ALTER TABLE subscription_renewals ADD FOREIGN KEY (invoice_id) REFERENCES invoices (id) ON DELETE SET NULL;

-- The renewal emails: payment failed (past due, with the grace period) and expired, beside the
-- kinds the outbox took so far.
ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_kind_check,
  ADD CONSTRAINT email_outbox_kind_check CHECK (kind = ANY ('{auto_refill_failed,dashboard_invite,dashboard_reset,low_bandwidth,new_invoice,server_alert,subscription_past_due,subscription_expired}'::text[]));
