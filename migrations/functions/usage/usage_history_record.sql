-- Adds a gateway's usage history tally (docs/adr/0103): p_rows is a JSON array of {account_id,
-- product, hour (ISO 8601), sub_user, counts}, counts being the columns of usage_history_hourly in
-- the order of USAGE_HISTORY_COLUMNS (gateway/src/accounting/history.ts): bytes_up, bytes_down,
-- requests, then the outcomes. Each row is added to its hour and to its UTC day. Rows of accounts
-- that no longer exist are skipped. Returns the daily rows written. lock_timeout: a flush must never hang behind a long
-- transaction (the rows are statistics; the gateway logs and drops them).
CREATE OR REPLACE FUNCTION usage_history_record(p_rows jsonb) RETURNS integer
LANGUAGE plpgsql SET lock_timeout = '2s' AS $$
DECLARE
  n integer;
BEGIN
  WITH rows AS (
    SELECT (x ->> 'account_id')::uuid AS account_id, date_trunc('hour', (x ->> 'hour')::timestamptz) AS hour,
           x ->> 'product' AS product, coalesce(x ->> 'sub_user', '') AS sub_user,
           ARRAY(SELECT jsonb_array_elements_text(x -> 'counts')::bigint) AS c
      FROM jsonb_array_elements(p_rows) x
      JOIN accounts a ON a.id = (x ->> 'account_id')::uuid
  ), hourly AS (
    INSERT INTO usage_history_hourly AS h (account_id, hour, product, sub_user, bytes_up, bytes_down, requests,
      succeeded, refused_no_bandwidth, refused_bad_credentials, refused_throttled, refused_target_not_allowed,
    refused_no_exit, upstream_connect_error, upstream_timeout, other, status_2xx, status_3xx, status_4xx, status_5xx)
    SELECT account_id, hour, product, sub_user, sum(c[1]), sum(c[2]), sum(c[3]), sum(c[4]), sum(c[5]), sum(c[6]), sum(c[7]), sum(c[8]),
         sum(c[9]), sum(c[10]), sum(c[11]), sum(c[12]), sum(c[13]), sum(c[14]), sum(c[15]), sum(c[16])
      FROM rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (account_id, hour, product, sub_user) DO UPDATE SET
      bytes_up = h.bytes_up + EXCLUDED.bytes_up, bytes_down = h.bytes_down + EXCLUDED.bytes_down,
    requests = h.requests + EXCLUDED.requests, succeeded = h.succeeded + EXCLUDED.succeeded,
    refused_no_bandwidth = h.refused_no_bandwidth + EXCLUDED.refused_no_bandwidth,
    refused_bad_credentials = h.refused_bad_credentials + EXCLUDED.refused_bad_credentials,
    refused_throttled = h.refused_throttled + EXCLUDED.refused_throttled,
    refused_target_not_allowed = h.refused_target_not_allowed + EXCLUDED.refused_target_not_allowed,
    refused_no_exit = h.refused_no_exit + EXCLUDED.refused_no_exit,
    upstream_connect_error = h.upstream_connect_error + EXCLUDED.upstream_connect_error,
    upstream_timeout = h.upstream_timeout + EXCLUDED.upstream_timeout, other = h.other + EXCLUDED.other,
    status_2xx = h.status_2xx + EXCLUDED.status_2xx, status_3xx = h.status_3xx + EXCLUDED.status_3xx,
    status_4xx = h.status_4xx + EXCLUDED.status_4xx, status_5xx = h.status_5xx + EXCLUDED.status_5xx
    RETURNING 1
  )
  INSERT INTO usage_history_daily AS h (account_id, day, product, sub_user, bytes_up, bytes_down, requests,
    succeeded, refused_no_bandwidth, refused_bad_credentials, refused_throttled, refused_target_not_allowed,
    refused_no_exit, upstream_connect_error, upstream_timeout, other, status_2xx, status_3xx, status_4xx, status_5xx)
  SELECT account_id, (hour AT TIME ZONE 'UTC')::date, product, sub_user, sum(c[1]), sum(c[2]), sum(c[3]), sum(c[4]), sum(c[5]), sum(c[6]), sum(c[7]), sum(c[8]),
         sum(c[9]), sum(c[10]), sum(c[11]), sum(c[12]), sum(c[13]), sum(c[14]), sum(c[15]), sum(c[16])
    FROM rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (account_id, day, product, sub_user) DO UPDATE SET
    bytes_up = h.bytes_up + EXCLUDED.bytes_up, bytes_down = h.bytes_down + EXCLUDED.bytes_down,
    requests = h.requests + EXCLUDED.requests, succeeded = h.succeeded + EXCLUDED.succeeded,
    refused_no_bandwidth = h.refused_no_bandwidth + EXCLUDED.refused_no_bandwidth,
    refused_bad_credentials = h.refused_bad_credentials + EXCLUDED.refused_bad_credentials,
    refused_throttled = h.refused_throttled + EXCLUDED.refused_throttled,
    refused_target_not_allowed = h.refused_target_not_allowed + EXCLUDED.refused_target_not_allowed,
    refused_no_exit = h.refused_no_exit + EXCLUDED.refused_no_exit,
    upstream_connect_error = h.upstream_connect_error + EXCLUDED.upstream_connect_error,
    upstream_timeout = h.upstream_timeout + EXCLUDED.upstream_timeout, other = h.other + EXCLUDED.other,
    status_2xx = h.status_2xx + EXCLUDED.status_2xx, status_3xx = h.status_3xx + EXCLUDED.status_3xx,
    status_4xx = h.status_4xx + EXCLUDED.status_4xx, status_5xx = h.status_5xx + EXCLUDED.status_5xx;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;
