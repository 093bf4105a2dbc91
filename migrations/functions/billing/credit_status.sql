-- An account's credit for bill-later payment this calendar month (UTC; docs/api.md "Credit
-- limit"): its limit (its own, else the default the worker writes from PROXYFLEET_CREDIT_LIMIT),
-- and what its unpaid bill-later invoices of the month add up to (operator and customer purchases,
-- auto-refills and renewals paid by invoice, still 'issued'; an invoice marked paid or void frees
-- its amount, docs/adr/0101, and charged ones are not credit). In the price table's currency,
-- and only the invoices in that currency are added: amounts in two currencies are never summed
-- (the worker refuses to change the currency once invoices exist, docs/adr/0091).
CREATE OR REPLACE FUNCTION credit_status(p_account uuid)
RETURNS TABLE (limit_cents bigint, used_cents bigint, currency text, own_limit boolean)
LANGUAGE sql STABLE AS $$
  SELECT coalesce(l.limit_cents, (SELECT s.credit_limit_cents FROM billing_settings s), 100000),
         coalesce((SELECT sum(i.amount_cents) FROM invoices i
                    WHERE i.account_id = p_account AND i.settlement = 'deferred' AND i.status = 'issued'
                      AND i.currency = t.currency
                      AND i.issued_at >= billing_month_start(billing_now())), 0)::bigint,
         t.currency,
         l.limit_cents IS NOT NULL
    FROM (SELECT coalesce((SELECT min(pp.currency) FROM product_prices pp), 'USD') AS currency) t
    LEFT JOIN account_credit_limits l ON l.account_id = p_account
$$;
