-- proxyfleet domain schema. Bytes are bigint, never floats (GB = 10^9 bytes, MB = 10^6 bytes).
-- Invariants the database can hold, it holds: a caller cannot break them by racing.

CREATE TABLE products (
  name text PRIMARY KEY
);
INSERT INTO products (name) VALUES ('light'), ('basic'), ('advanced'), ('mobile'), ('datacenter');

CREATE TABLE accounts (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email text NOT NULL CHECK (email ~ '^[^@[:space:]]+@[^@[:space:]]+$' AND length(email) <= 254),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX accounts_email_key ON accounts (lower(email));

-- API keys: only sha256(key) is stored; the key is shown once. prefix is the display prefix
-- (for example svc_live_3fa9c1), last4 the last four characters.
CREATE TABLE api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('primary', 'named')),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
  key_hash bytea NOT NULL CHECK (octet_length(key_hash) = 32),
  prefix text NOT NULL,
  last4 text NOT NULL CHECK (length(last4) = 4),
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  last_used_at timestamptz
);
CREATE UNIQUE INDEX api_keys_hash_key ON api_keys (key_hash);
CREATE INDEX api_keys_account_idx ON api_keys (account_id);
-- One active primary key per account.
CREATE UNIQUE INDEX api_keys_one_primary ON api_keys (account_id) WHERE kind = 'primary' AND revoked_at IS NULL;
-- Named keys are told apart by name while active.
CREATE UNIQUE INDEX api_keys_named_name ON api_keys (account_id, name) WHERE kind = 'named' AND revoked_at IS NULL;

-- api_keys_named_limit(): created here at first; its one definition is migrations/functions/api_keys_named_limit.sql (docs/adr/0084).
-- trigger api_keys_named_limit: created with its function, migrations/functions/api_keys_named_limit.sql (docs/adr/0084).

-- Proxy credentials. The password must be retrievable (generated proxy strings contain it), so
-- it is encrypted at rest (AES-256-GCM, key from configuration); gateways verify with the sha256
-- and never need the encryption key. Usernames and passwords are [a-z0-9] / [A-Za-z0-9] so the
-- credential grammars' separators ('-', '_') can never occur inside them.
CREATE TABLE proxy_credentials (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  username text NOT NULL UNIQUE CHECK (username ~ '^[a-z0-9]{4,32}$'),
  password_enc bytea NOT NULL,
  password_sha256 bytea NOT NULL CHECK (octet_length(password_sha256) = 32),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Balances per account and product. used_bytes is what the worker has folded from usage batches;
-- leased_bytes is what gateways hold in outstanding leases and have not been charged yet.
-- used_bytes may exceed total_bytes by the documented overspend bound; no column goes negative.
CREATE TABLE balances (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  total_bytes bigint NOT NULL DEFAULT 0 CHECK (total_bytes >= 0),
  used_bytes bigint NOT NULL DEFAULT 0 CHECK (used_bytes >= 0),
  leased_bytes bigint NOT NULL DEFAULT 0 CHECK (leased_bytes >= 0),
  requests_count bigint NOT NULL DEFAULT 0 CHECK (requests_count >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, product)
);

CREATE TABLE purchases (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  bytes bigint NOT NULL CHECK (bytes > 0),
  source text NOT NULL DEFAULT 'admin' CHECK (source IN ('admin', 'auto_refill')),
  -- An auto-refill or a retried admin call carries one, so it cannot buy twice. The key is the
  -- caller's, scoped to its account: the same key on two accounts is two purchases.
  idempotency_key text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX purchases_account_idx ON purchases (account_id, created_at);
CREATE UNIQUE INDEX purchases_account_idempotency_key ON purchases (account_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;

CREATE TABLE invoices (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  number bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  purchase_id uuid NOT NULL UNIQUE REFERENCES purchases (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  bytes bigint NOT NULL CHECK (bytes > 0),
  amount_cents bigint CHECK (amount_cents >= 0),
  currency text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
  status text NOT NULL DEFAULT 'issued' CHECK (status IN ('issued', 'paid', 'void')),
  issued_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX invoices_account_idx ON invoices (account_id, issued_at);

-- Usage: gateways insert batches (insert-only, unique idempotency key, so a retried flush is a
-- no-op); one active worker folds unfolded batches into balances and the hourly roll-up.
CREATE TABLE usage_batches (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  idempotency_key text NOT NULL UNIQUE,
  gateway_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  folded_at timestamptz
);
CREATE INDEX usage_batches_unfolded_idx ON usage_batches (id) WHERE folded_at IS NULL;

CREATE TABLE usage_batch_lines (
  batch_id bigint NOT NULL REFERENCES usage_batches (id) ON DELETE CASCADE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  lease_id uuid,
  bytes_up bigint NOT NULL DEFAULT 0 CHECK (bytes_up >= 0),
  bytes_down bigint NOT NULL DEFAULT 0 CHECK (bytes_down >= 0),
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  PRIMARY KEY (batch_id, account_id, product)
);

CREATE TABLE usage_hourly (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  hour timestamptz NOT NULL,
  bytes_up bigint NOT NULL DEFAULT 0 CHECK (bytes_up >= 0),
  bytes_down bigint NOT NULL DEFAULT 0 CHECK (bytes_down >= 0),
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  PRIMARY KEY (account_id, product, hour)
);

-- Bandwidth leases (DESIGN.md decision 7): a gateway draws granted_bytes for (account, product),
-- spends it locally and settles it with its flushes. charged_bytes is what folding has charged
-- against it; released_at is set when the gateway returns it (or the reaper, after expires_at).
CREATE TABLE bandwidth_leases (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  gateway_id text NOT NULL,
  granted_bytes bigint NOT NULL CHECK (granted_bytes >= 0),
  charged_bytes bigint NOT NULL DEFAULT 0 CHECK (charged_bytes >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  released_at timestamptz
);
CREATE INDEX bandwidth_leases_open_idx ON bandwidth_leases (expires_at) WHERE released_at IS NULL;
CREATE INDEX bandwidth_leases_account_idx ON bandwidth_leases (account_id, product) WHERE released_at IS NULL;

-- Static ISP proxies sold to an account.
CREATE TABLE isp_proxies (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  host text NOT NULL CHECK (length(host) BETWEEN 1 AND 253),
  port integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
  username text NOT NULL CHECK (length(username) BETWEEN 1 AND 64),
  password_enc bytea NOT NULL,
  country text NOT NULL CHECK (country ~ '^[a-z]{2}$'),
  city text,
  isp text,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'expired')),
  expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (host, port, username)
);
CREATE INDEX isp_proxies_account_idx ON isp_proxies (account_id);

-- Email alert switches; the spec's defaults: low bandwidth and new invoice on, server alerts off.
CREATE TABLE alert_settings (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  low_bandwidth boolean NOT NULL DEFAULT true,
  new_invoice boolean NOT NULL DEFAULT true,
  server_alerts boolean NOT NULL DEFAULT false,
  -- Remaining share of a product's purchased bandwidth at which "low bandwidth" is sent.
  low_bandwidth_percent integer NOT NULL DEFAULT 10 CHECK (low_bandwidth_percent BETWEEN 1 AND 99),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE auto_refill_settings (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  enabled boolean NOT NULL DEFAULT false,
  threshold_bytes bigint NOT NULL CHECK (threshold_bytes >= 0),
  refill_bytes bigint NOT NULL CHECK (refill_bytes > 0),
  max_refills_per_month integer NOT NULL DEFAULT 5 CHECK (max_refills_per_month BETWEEN 1 AND 100),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, product)
);

-- Transactional email outbox: written in the same transaction as its cause; dedupe_key makes an
-- alert at most once per (account, type, threshold, cycle); the worker claims rows with
-- FOR UPDATE SKIP LOCKED.
CREATE TABLE email_outbox (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id uuid REFERENCES accounts (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('low_bandwidth', 'new_invoice', 'server_alert')),
  dedupe_key text NOT NULL UNIQUE,
  to_address text NOT NULL,
  subject text NOT NULL,
  body_text text NOT NULL,
  message_id text NOT NULL UNIQUE,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  sent_at timestamptz
);
CREATE INDEX email_outbox_due_idx ON email_outbox (next_attempt_at) WHERE status = 'pending';

-- Change log for cache invalidation. Every change a cache must see (key issued or revoked,
-- proxy password reset, account suspended or reactivated, bandwidth bought) is written here by
-- a trigger, in the writer's transaction, and announced with NOTIFY proxyfleet_changes carrying
-- the row id. The id is the cache version a pod reports; a pod that lost its LISTEN connection
-- catches up by reading the rows after the last id it applied.
CREATE TABLE change_log (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('api_key', 'proxy_credentials', 'account', 'balance', 'isp_proxy')),
  account_id uuid NOT NULL,
  -- api_key: hex sha256 of the key; proxy_credentials: the username (old one on a rename).
  subject text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX change_log_created_idx ON change_log (created_at);

-- change_log_record(): created here at first; its one definition is migrations/functions/change_log_record.sql (docs/adr/0084).

-- change_log_api_keys(): created here at first; its one definition is migrations/functions/change_log_api_keys.sql (docs/adr/0084).
-- trigger change_log_api_keys: created with its function, migrations/functions/change_log_api_keys.sql (docs/adr/0084).

-- change_log_proxy_credentials(): created here at first; its one definition is migrations/functions/change_log_proxy_credentials.sql (docs/adr/0084).
-- trigger change_log_proxy_credentials: created with its function, migrations/functions/change_log_proxy_credentials.sql (docs/adr/0084).

-- change_log_accounts(): created here at first; its one definition is migrations/functions/change_log_accounts.sql (docs/adr/0084).
-- trigger change_log_accounts: created with its function, migrations/functions/change_log_accounts.sql (docs/adr/0084).

-- change_log_balances(): created here at first; its one definition is migrations/functions/change_log_balances.sql (docs/adr/0084).
-- trigger change_log_balances_insert: created with its function, migrations/functions/change_log_balances.sql (docs/adr/0084).
-- trigger change_log_balances_update: created with its function, migrations/functions/change_log_balances.sql (docs/adr/0084).

-- change_log_isp_proxies(): created here at first; its one definition is migrations/functions/change_log_isp_proxies.sql (docs/adr/0084).
-- trigger change_log_isp_proxies: created with its function, migrations/functions/change_log_isp_proxies.sql (docs/adr/0084).
