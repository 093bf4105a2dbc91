-- The usage history at 1,000 accounts x 5 products: 90 days of hours (the hourly retention) and 400
-- days, written in time order as gateways write them (docs/benchmarks.md "Usage history"). Run on a
-- scratch database after `npm run migrate`: psql -f loadtest/usage-history/generate.sql
\timing on
INSERT INTO accounts (email) SELECT 'bench' || g || '@example.com' FROM generate_series(1, 1000) g;
INSERT INTO usage_history_hourly (account_id, hour, product, bytes_up, bytes_down, requests, succeeded, refused_bad_credentials, upstream_timeout, status_2xx)
SELECT a.id, h, p, 1000, 50000, 40, 37, 2, 1, 30
  FROM generate_series(date_trunc('hour', now()) - interval '90 days', date_trunc('hour', now()), interval '1 hour') h
 CROSS JOIN (SELECT id FROM accounts) a
 CROSS JOIN unnest(ARRAY['light','basic','advanced','mobile','datacenter']) p;
INSERT INTO usage_history_daily (account_id, day, product, bytes_up, bytes_down, requests, succeeded, refused_bad_credentials, upstream_timeout, status_2xx)
SELECT a.id, d::date, p, 24000, 1200000, 960, 888, 48, 24, 720
  FROM generate_series(current_date - 399, current_date, interval '1 day') d
 CROSS JOIN (SELECT id FROM accounts) a
 CROSS JOIN unnest(ARRAY['light','basic','advanced','mobile','datacenter']) p;
VACUUM ANALYZE usage_history_hourly;
VACUUM ANALYZE usage_history_daily;
SELECT pg_size_pretty(pg_total_relation_size('usage_history_hourly')) AS hourly, pg_size_pretty(pg_total_relation_size('usage_history_daily')) AS daily,
       (SELECT count(*) FROM usage_history_hourly) AS hourly_rows, (SELECT count(*) FROM usage_history_daily) AS daily_rows;
