-- The history API's query (api/src/modules/usage/history-repo.ts) for 30 days of hours, all products,
-- for 200 random accounts: p50, p99 and max of EXPLAIN ANALYZE's Execution Time (docs/benchmarks.md
-- "Usage history"). psql -f loadtest/usage-history/explain.sql after generate.sql.
CREATE TEMP TABLE times (ms float8);
DO $$
DECLARE
  a uuid;
  j json;
BEGIN
  FOR a IN SELECT id FROM accounts ORDER BY random() LIMIT 200 LOOP
    EXECUTE format($q$EXPLAIN (ANALYZE, FORMAT JSON)
      SELECT (extract(epoch FROM hour::timestamp AT TIME ZONE 'UTC') * 1000)::float8 AS start,
             ARRAY[sum(bytes_up)::float8, sum(bytes_down)::float8, sum(requests)::float8, sum(succeeded)::float8,
                   sum(refused_no_bandwidth)::float8, sum(refused_bad_credentials)::float8, sum(refused_throttled)::float8,
                   sum(refused_target_not_allowed)::float8, sum(refused_no_exit)::float8, sum(upstream_connect_error)::float8,
                   sum(upstream_timeout)::float8, sum(other)::float8, sum(status_2xx)::float8, sum(status_3xx)::float8,
                   sum(status_4xx)::float8, sum(status_5xx)::float8] AS counts
        FROM usage_history_hourly
       WHERE account_id = %L AND hour >= date_trunc('hour', now()) - interval '30 days' AND hour < date_trunc('hour', now()) + interval '1 hour'
         AND (NULL::text IS NULL OR product = NULL) AND (NULL::text IS NULL OR sub_user = NULL)
       GROUP BY hour ORDER BY hour$q$, a) INTO j;
    INSERT INTO times VALUES ((j -> 0 ->> 'Execution Time')::float8);
  END LOOP;
END $$;
SELECT count(*) AS runs, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS p50_ms,
       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2) AS p99_ms, round(max(ms)::numeric, 2) AS max_ms FROM times;
