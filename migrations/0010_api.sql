-- The API's shared state: rate-limit buckets and per-account usage snapshots, both shared by every
-- API process so that limits and answers agree whichever pod serves a request (docs/adr/0010,
-- docs/adr/0011).

-- GCRA buckets (generic cell rate algorithm): one row per bucket ("key:<api key id>",
-- "authfail:<address>"); tat_us is the theoretical arrival time in microseconds since the epoch
-- (whole milliseconds would cap a key at 1,000 requests per second).
CREATE TABLE api_rate_limits (
  bucket text PRIMARY KEY CHECK (length(bucket) BETWEEN 1 AND 200),
  tat_us bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_rate_limits_updated_idx ON api_rate_limits (updated_at);

-- api_rate_limit_take(): created here at first; its one definition is migrations/functions/api_rate_limit_take.sql (docs/adr/0084).

-- The usage answer per account (GET /api/v1/usage), recomputed from balances at most every
-- PROXYFLEET_USAGE_REFRESH_SECONDS by whichever API process is asked first; computed_at is the
-- answer's updatedAt. balances: {"<product>": {"total": bytes, "used": bytes}} for every product.
CREATE TABLE api_usage_snapshots (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  balances jsonb NOT NULL,
  requests_count bigint NOT NULL CHECK (requests_count >= 0),
  computed_at timestamptz NOT NULL
);

-- change_log_account_settings(): created here at first; its one definition is migrations/functions/change_log_account_settings.sql (docs/adr/0084).
-- trigger change_log_alert_settings: created with its function, migrations/functions/change_log_account_settings.sql (docs/adr/0084).
-- trigger change_log_auto_refill_settings: created with its function, migrations/functions/change_log_account_settings.sql (docs/adr/0084).
