-- Writers of one product's allowlist take turns (docs/adr/0036). The exclusion constraint of
-- migrations/0084 alone decides who owns an address, but two transactions inserting overlapping
-- ranges each find the other's uncommitted row, each wait for the other to end, and PostgreSQL
-- aborts one of them as a deadlock (40P01): the API answered 500 where the loser is owed 409
-- ALLOWLIST_OVERLAP. A transaction-level advisory lock per product, taken before the row is
-- written, makes the second writer wait for the first to commit or roll back and then meet the
-- constraint as an ordinary violation. Additions are rare (a customer's few entries), so one lock
-- per product costs nothing; the two-key form (this table's oid, the product's hash) cannot meet
-- the single-key locks of worker leadership and migrations.
CREATE OR REPLACE FUNCTION ip_allowlist_take_turns() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock('ip_allowlist'::regclass::oid::integer, hashtext(NEW.product));
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER ip_allowlist_take_turns BEFORE INSERT OR UPDATE OF account_id, product, cidr ON ip_allowlist
  FOR EACH ROW EXECUTE FUNCTION ip_allowlist_take_turns();
