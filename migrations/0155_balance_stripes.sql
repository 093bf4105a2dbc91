-- The hot customer off one balance row (docs/adr/0107). A balance whose open leases are held by
-- many gateways gets stripes: balance_stripes rows (account, product, stripe 0..K-1) holding bytes
-- set aside for draws (free_bytes). A draw takes from one stripe (its gateway's own, else any other
-- that is not locked) and locks only that row; the release or shrink of a lease drawn from a
-- stripe gives its unspent bytes back to that stripe, and locks only that row.
--
-- balances.striped_bytes is what the stripes hold in all: their free bytes plus what the leases
-- drawn from them still hold (the arithmetic of leased_bytes, migrations/0020). A draw or a
-- release moves bytes inside it and leaves it unchanged; only the fold (charging a striped lease:
-- striped_bytes -> used_bytes, as leased_bytes -> used_bytes) and the re-levelling of the stripes
-- (balance_stripes_rebalance, balance_stripes_drain) change it, with the balance row locked. A draw
-- on the balance row can still grant total - used - leased - striped; everything promised is
-- leased + striped, as it was leased before: the overspend bound of docs/adr/0020 is unchanged.
-- stripes_open: whether draws may take from the stripes (the worker sets it while remaining stays
-- clear of every billing threshold, so a draw from a stripe has no billing decision to make).
--
-- bandwidth_leases.stripe: the stripe a lease was drawn from; NULL for a draw on the balance row.
-- Lock order: lease rows (by id), balance rows (by account, product), stripe rows (by account,
-- product, stripe). Nobody holding a stripe row waits for a balance row.
ALTER TABLE balances
  ADD COLUMN striped_bytes bigint NOT NULL DEFAULT 0 CHECK (striped_bytes >= 0),
  ADD COLUMN stripes_open boolean NOT NULL DEFAULT false;
ALTER TABLE bandwidth_leases ADD COLUMN stripe smallint CHECK (stripe >= 0);

-- No foreign key to balances: PostgreSQL checks one again when a row updated earlier in the same
-- transaction is updated (a flush returning two leases of one stripe), and that check's KEY SHARE
-- lock on the balance row would wait for a draw holding it, which waits for this stripe: a
-- deadlock. The account's (KEY SHARE on the account row, as every lease insert takes) is harmless.
CREATE TABLE balance_stripes (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  stripe smallint NOT NULL CHECK (stripe >= 0),
  free_bytes bigint NOT NULL DEFAULT 0 CHECK (free_bytes >= 0),
  PRIMARY KEY (account_id, product, stripe)
);
CREATE INDEX balances_stripes_open_idx ON balances (account_id, product) WHERE stripes_open;
