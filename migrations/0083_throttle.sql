-- Bandwidth throttling (docs/adr/0035): a cap in bytes per second per account
-- and product, overriding the plan's default from the ProxyGateway spec. No row: the plan's
-- default (none when the spec sets none). The bounds are common/src/throttle.ts's.
--
-- Sub-users do not exist yet; when they do, a cap per sub-user gets its own table.
CREATE TABLE account_throttles (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  bytes_per_second bigint NOT NULL CHECK (bytes_per_second BETWEEN 65536 AND 10000000000),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, product)
);

-- Gateways learn caps with the account's other facts: a change is announced as an 'account'
-- change (as alert and auto-refill settings are, migrations/0010), so every gateway's credential
-- cache reloads the account within a second and its ledger applies the cap on the next tick.
-- trigger change_log_account_throttles: created with its function, migrations/functions/change_log_account_settings.sql (docs/adr/0084).
