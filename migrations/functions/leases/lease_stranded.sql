-- What a customer's balance has stranded in the leases of gateways that stopped heartbeating but
-- are not yet judged dead (docs/adr/0025): a gateway whose row is two heartbeats (10 s) older than
-- the freshest row has most likely crashed, and its leases come back at gateway_dead_after(). The
-- ledger asks this only after a denial while leases are held, to answer 503 "held, retry shortly"
-- instead of 402 "buy bandwidth" to a customer who paid (402 only when the balance is gone:
-- docs/adr/0024).
--
-- Against the freshest row, not now(): right after a failover every row is as old as the outage,
-- and the gateways behind them are alive (the failover scenario answered "held by a gateway that
-- stopped" 0.7 s before the promotion; docs/adr/0095).
CREATE OR REPLACE FUNCTION lease_stranded(p_account uuid, p_product text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT coalesce(sum(l.granted_bytes - l.charged_bytes), 0)::bigint
    FROM bandwidth_leases l JOIN gateway_heartbeats h ON h.gateway_id = l.gateway_id
   WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL
     AND h.beat_at < (SELECT max(f.beat_at) FROM gateway_heartbeats f) - interval '10 seconds'
$$;
