-- How many stripes a hot balance has (docs/adr/0107), and how many gateways must hold open leases
-- on a balance for the worker to open them: below that the balance row alone serves its draws.
CREATE OR REPLACE FUNCTION balance_stripe_count(OUT stripes integer, OUT min_gateways integer)
LANGUAGE sql IMMUTABLE AS $$ SELECT 16, 8 $$;
