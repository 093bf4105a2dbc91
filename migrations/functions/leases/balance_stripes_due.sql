-- The balances the worker's balance-stripes job re-levels (balance_stripes_rebalance, docs/adr/0107):
-- those whose open leases are held by at least min_gateways gateways, and those whose stripes
-- are open (to close them when that is no longer so).
CREATE OR REPLACE FUNCTION balance_stripes_due(p_limit integer)
RETURNS TABLE (account_id uuid, product text)
LANGUAGE sql STABLE AS $$
  SELECT l.account_id, l.product FROM bandwidth_leases l
   WHERE l.released_at IS NULL
   GROUP BY l.account_id, l.product
  HAVING count(DISTINCT l.gateway_id) >= (balance_stripe_count()).min_gateways
  UNION
  SELECT b.account_id, b.product FROM balances b WHERE b.stripes_open
  ORDER BY 1, 2
  LIMIT p_limit
$$;
