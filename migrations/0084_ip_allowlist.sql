-- IP allowlist (docs/adr/0036): source addresses or ranges that authenticate to a
-- product's gateways without a password, each with the targeting it stands for (the plan's
-- credential suffix grammar, docs/adr/0003; NULL = rotating, any country).
--
-- One owner per address and product: the bandwidth of a connection from an address must belong to
-- exactly one account, so two accounts' ranges of the same product never overlap (the exclusion
-- constraint; btree_gist gives uuid and text the gist operators `<>` and `=` need). Ranges of one
-- account may overlap (a /32 inside the account's /24 with other targeting): the gateway takes the
-- longest prefix. Width and count limits are the API's (PROXYFLEET_IP_ALLOWLIST_*), since they
-- are configuration, not invariants.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE ip_allowlist (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  cidr cidr NOT NULL,
  targeting text CHECK (targeting IS NULL OR length(targeting) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, product, cidr),
  CONSTRAINT ip_allowlist_one_owner
    EXCLUDE USING gist (product WITH =, cidr inet_ops WITH &&, account_id WITH <>)
);
CREATE INDEX ip_allowlist_account ON ip_allowlist (account_id);

-- Gateways learn entries with the account's other facts: announced as an 'account' change (as
-- throttles are, migrations/0083), so every credential cache reloads the account within a second
-- and cuts live connections admitted through an entry that is gone.
-- trigger change_log_ip_allowlist: created with its function, migrations/functions/change_log_account_settings.sql (docs/adr/0084).
