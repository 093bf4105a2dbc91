-- An account's credit for bill-later payment this calendar month (UTC; docs/api.md "Credit
-- limit"): its limit (its own, else the default the worker writes from PROXYFLEET_CREDIT_LIMIT),
-- and what its bill-later invoices of the month add up to (operator purchases and auto-refills
-- paid by invoice; void invoices and charged ones are not credit). In the price table's currency.
CREATE OR REPLACE FUNCTION credit_status(p_account uuid)
RETURNS TABLE (limit_cents bigint, used_cents bigint, currency text, own_limit boolean)
LANGUAGE sql STABLE AS $$
  SELECT coalesce(l.limit_cents, (SELECT s.credit_limit_cents FROM billing_settings s), 100000),
         coalesce((SELECT sum(i.amount_cents) FROM invoices i
                    WHERE i.account_id = p_account AND i.settlement = 'deferred' AND i.status <> 'void'
                      AND i.issued_at >= billing_month_start(billing_now())), 0)::bigint,
         coalesce((SELECT min(pp.currency) FROM product_prices pp), 'USD'),
         l.limit_cents IS NOT NULL
    FROM (SELECT 1) one LEFT JOIN account_credit_limits l ON l.account_id = p_account
$$;
