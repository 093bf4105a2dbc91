-- The one definition of "used" (docs/api.md "Remaining bandwidth", docs/adr/0073): every byte the
-- gateways reported for the balance: folded by the worker (used_bytes), or reported with a lease
-- request before the fold (reported_used_bytes). Bytes held in leases are not used. Remaining is
-- total - this (negative by at most the overspend bound; shown as 0).
CREATE OR REPLACE FUNCTION billing_used(p_used bigint, p_reported bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT greatest(p_used, p_reported)
$$;
