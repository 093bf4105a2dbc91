-- GCRA in microseconds: with whole milliseconds per token a key could not be allowed more than
-- 1,000 requests per second (60,000 per minute). Same semantics as 0010, finer clock.
ALTER TABLE api_rate_limits RENAME COLUMN tat_ms TO tat_us;
UPDATE api_rate_limits SET tat_us = tat_us * 1000;
DROP FUNCTION api_rate_limit_take(text, bigint, integer, integer);

-- Takes up to p_want tokens from a bucket that refills one token every p_interval_us and holds at
-- most p_burst; returns the tokens granted, those left, and (none granted) the microseconds until
-- one is available.
CREATE FUNCTION api_rate_limit_take(p_bucket text, p_interval_us bigint, p_burst integer, p_want integer)
RETURNS TABLE (granted integer, remaining integer, retry_after_us bigint)
LANGUAGE plpgsql AS $$
DECLARE
  now_us bigint := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
  tau bigint := p_interval_us * p_burst;
  cur bigint;
  base bigint;
  available bigint;
  take integer;
BEGIN
  INSERT INTO api_rate_limits AS r (bucket, tat_us) VALUES (p_bucket, now_us)
  ON CONFLICT (bucket) DO UPDATE SET updated_at = now()
  RETURNING r.tat_us INTO cur;
  base := greatest(cur, now_us);
  available := greatest(0, (now_us + tau - base) / p_interval_us);
  take := least(p_want, available)::integer;
  IF take > 0 THEN
    UPDATE api_rate_limits SET tat_us = base + take * p_interval_us WHERE bucket = p_bucket;
    RETURN QUERY SELECT take, (available - take)::integer, 0::bigint;
  ELSE
    RETURN QUERY SELECT 0, 0, greatest(1, base + p_interval_us - tau - now_us);
  END IF;
END $$;
