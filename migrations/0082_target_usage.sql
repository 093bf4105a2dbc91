-- Target statistics (docs/adr/0026): bytes and requests per registrable domain
-- (never a path, a query or a full host name) per account, product and UTC day, kept 30 days by the
-- worker. Gateways tally in memory and add their rows with target_usage_record() on their usage
-- flush; billing never reads this table.
--
-- Sub-users do not exist yet. When they do, a nullable sub_user_id column joins the key through a
-- unique index on (account_id, product, day, coalesce(sub_user_id, <nil uuid>), domain).

-- The account-level switch (default on; the customer turns it off in the API or dashboard, the
-- operator in the admin API). Off: no rows are recorded, and turning it off deletes the stored ones.
ALTER TABLE accounts ADD COLUMN target_stats boolean NOT NULL DEFAULT true;

CREATE TABLE target_usage (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  day date NOT NULL,
  -- A registrable domain, an IP address, or '(other)': the domains past the per-day cap
  -- (parentheses cannot occur in a host name).
  domain text NOT NULL CHECK (length(domain) BETWEEN 1 AND 253 AND domain !~ '[/?#[:space:]]'),
  bytes bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  PRIMARY KEY (account_id, product, day, domain)
);
-- The retention job deletes by day.
CREATE INDEX target_usage_day_idx ON target_usage (day);

-- target_usage_record(): created here at first; its one definition is migrations/functions/target_usage_record.sql (docs/adr/0084).
