-- Takes up to p_want tokens from a bucket that refills one token every p_interval_us and holds at
-- most p_burst. Atomic under concurrency (the row lock of INSERT .. ON CONFLICT DO UPDATE), on the
-- database clock so that every process agrees on time. Returns the tokens granted (0 when none is
-- available), the tokens still available after the grant, and when none is granted, the
-- microseconds until one is.
CREATE OR REPLACE FUNCTION api_rate_limit_take(p_bucket text, p_interval_us bigint, p_burst integer, p_want integer)
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
