-- Usage history with outcomes (docs/api.md "Usage history", docs/adr/0103): what each gateway
-- tallied per (account, sub-user, product, hour) at its access log's completion points, added on
-- its usage flush by usage_history_record (one statement per flush). One table per granularity so
-- each keeps its own retention (the worker's maintenance job: hourly 90 days, daily 400 by
-- default). sub_user: the sub-user's id, '' for the account's own credentials and IP allowlist.
-- Bytes are the customer socket's counters of the billed lines (the ones billing reads); the
-- outcome columns add up to requests. There is no TLS column: the gateway has no TLS leg of its
-- own towards origins or exits (a CONNECT tunnel carries the customer's TLS end to end), so no
-- TLS failure is observable to it (docs/adr/0103).
CREATE TABLE usage_history_hourly (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  hour timestamptz NOT NULL,
  product text NOT NULL REFERENCES products (name),
  sub_user text NOT NULL DEFAULT '',
  bytes_up bigint NOT NULL DEFAULT 0 CHECK (bytes_up >= 0),
  bytes_down bigint NOT NULL DEFAULT 0 CHECK (bytes_down >= 0),
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  succeeded bigint NOT NULL DEFAULT 0,
  refused_no_bandwidth bigint NOT NULL DEFAULT 0,
  refused_bad_credentials bigint NOT NULL DEFAULT 0,
  refused_throttled bigint NOT NULL DEFAULT 0,
  refused_target_not_allowed bigint NOT NULL DEFAULT 0,
  refused_no_exit bigint NOT NULL DEFAULT 0,
  upstream_connect_error bigint NOT NULL DEFAULT 0,
  upstream_timeout bigint NOT NULL DEFAULT 0,
  other bigint NOT NULL DEFAULT 0,
  status_2xx bigint NOT NULL DEFAULT 0,
  status_3xx bigint NOT NULL DEFAULT 0,
  status_4xx bigint NOT NULL DEFAULT 0,
  status_5xx bigint NOT NULL DEFAULT 0,
  -- The counters ride in the key's index: a range of one account is an index-only scan of
  -- neighbouring entries, where the heap, filled hour by hour for every account, holds one of its
  -- rows per page (30 days of hours at 1,000 accounts: p99 542 ms from the heap, 26 ms from the
  -- index; docs/benchmarks.md "Usage history").
  PRIMARY KEY (account_id, hour, product, sub_user) INCLUDE (bytes_up, bytes_down, requests, succeeded, refused_no_bandwidth, refused_bad_credentials, refused_throttled,
    refused_target_not_allowed, refused_no_exit, upstream_connect_error, upstream_timeout, other, status_2xx,
    status_3xx, status_4xx, status_5xx)
);

CREATE TABLE usage_history_daily (LIKE usage_history_hourly INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE usage_history_daily RENAME COLUMN hour TO day;
ALTER TABLE usage_history_daily ALTER COLUMN day TYPE date USING day::date;
ALTER TABLE usage_history_daily ADD PRIMARY KEY (account_id, day, product, sub_user) INCLUDE (bytes_up, bytes_down, requests, succeeded, refused_no_bandwidth, refused_bad_credentials, refused_throttled,
    refused_target_not_allowed, refused_no_exit, upstream_connect_error, upstream_timeout, other, status_2xx,
    status_3xx, status_4xx, status_5xx),
  ADD FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
  ADD FOREIGN KEY (product) REFERENCES products (name);

-- usage_history_record(): its one definition is migrations/functions/usage/usage_history_record.sql (docs/adr/0074).
