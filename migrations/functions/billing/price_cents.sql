-- The one price formula (docs/api.md "Invoices"): bytes times the product's price per GB
-- (product_prices, written by the worker from PROXYFLEET_PRICES_PER_GB), in cents of the table's
-- currency. The one rounding rule for money (docs/adr/0091): an amount is kept in whole cents
-- (bigint) and a fraction of a cent is rounded UP to the next cent, so any priced quantity costs at
-- least one cent: nothing bought rounds to free. Invoices, auto-refill charges, renewals of
-- bandwidth plans and the credit limit all use it.
CREATE OR REPLACE FUNCTION price_cents(p_product text, p_bytes bigint)
RETURNS TABLE (cents bigint, currency text)
LANGUAGE sql STABLE AS $$
  SELECT coalesce(ceil(p_bytes * pp.cents_per_gb / 1000000000)::bigint, 0), coalesce(pp.currency, 'USD')
    FROM (SELECT 1) one LEFT JOIN product_prices pp ON pp.product = p_product
$$;
