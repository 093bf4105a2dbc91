-- The billing clock (docs/adr/0075): the database's now(), moved by the offset in billing_clock.
-- That table is empty in production; tests set an offset to cross a month (the monthly refill cap,
-- the credit limit) without waiting. Every billing decision that depends on the date reads this.
CREATE OR REPLACE FUNCTION billing_now() RETURNS timestamptz
LANGUAGE sql STABLE AS $$
  SELECT now() + coalesce((SELECT c.offset_interval FROM billing_clock c), interval '0')
$$;
