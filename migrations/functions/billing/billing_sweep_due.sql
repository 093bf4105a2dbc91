-- The balances no draw or fold looks at that need a billing decision now (the worker's
-- balance-sweep, every 5 s; docs/adr/0073): an armed crossing that settings or a new month put in
-- reach (auto-refill or alert turned on, a threshold raised), or an open auto-refill crossing
-- without its refill that a refill may now buy (a new month lifted the monthly cap). The worker
-- decides on each with billing_sweep_one, one transaction each.
CREATE OR REPLACE FUNCTION billing_sweep_due(p_limit integer)
RETURNS TABLE (account_id uuid, product text)
LANGUAGE sql STABLE AS $$
  SELECT b.account_id, b.product
    FROM balances b
    LEFT JOIN auto_refill_settings r ON r.account_id = b.account_id AND r.product = b.product AND r.enabled
    LEFT JOIN billing_crossings cr ON cr.account_id = b.account_id AND cr.product = b.product AND cr.kind = 'auto_refill'
    LEFT JOIN billing_crossings cl ON cl.account_id = b.account_id AND cl.product = b.product AND cl.kind = 'low_bandwidth'
    LEFT JOIN alert_settings s ON s.account_id = b.account_id
   WHERE b.total_bytes > 0
     AND ((r.account_id IS NOT NULL
           AND ((coalesce(cr.armed, true)
                 AND b.total_bytes - billing_used(b.used_bytes, b.reported_used_bytes) < r.threshold_bytes)
                OR (NOT cr.armed AND cr.crossings > 0
                    AND NOT EXISTS (SELECT 1 FROM auto_refills x WHERE x.account_id = b.account_id
                                      AND x.idempotency_key = 'auto-refill:' || b.product || ':crossing:' || cr.crossings)
                    AND (SELECT v.allowed FROM billing_refill_verdict(b.account_id, b.product) v))))
          OR (coalesce(s.low_bandwidth, true) AND coalesce(cl.armed, true)
              AND b.total_bytes - billing_used(b.used_bytes, b.reported_used_bytes)
                  <= billing_alert_threshold(b.total_bytes, s.low_bandwidth_percent, s.low_bandwidth_floor_bytes)))
   ORDER BY b.account_id, b.product
   LIMIT p_limit
$$;
