-- A subscription's price per period (docs/billing.md "Prices"): an ISP proxy rental costs its
-- proxy count times the country's price per proxy-month (isp_proxy_prices, the row '*' for other
-- countries); a bandwidth plan costs its GB at the product's price per GB (price_cents).
CREATE OR REPLACE FUNCTION subscription_price(p_kind text, p_country text, p_count integer, p_product text,
                                              p_gb integer)
RETURNS TABLE (cents bigint, currency text)
LANGUAGE sql STABLE AS $$
  (SELECT p_count * pp.cents_per_month, pp.currency
     FROM isp_proxy_prices pp
    WHERE p_kind = 'isp_proxy' AND pp.country IN (p_country, '*')
    ORDER BY pp.country = '*' LIMIT 1)
  UNION ALL
  SELECT pc.cents, pc.currency FROM price_cents(p_product, p_gb::bigint * 1000000000) pc
   WHERE p_kind = 'bandwidth_plan'
$$;
