-- Sub-users (docs/adr/0037): named proxy users of an account, each with its own
-- proxy username and password in the plan's credential grammar, an optional traffic limit per
-- product, an optional cap on concurrent connections and on bandwidth, and a status.
--
-- Billing stays the account's: a sub-user's bytes are the account's bytes (its usage lines are
-- the account's lines, its leases are the account's leases), so a sub-user can never spend what
-- the account did not buy. The limit is a second ceiling on the same leases: lease_acquire grants
-- the least of what the account has free and what the sub-user's limit leaves, and usage_fold
-- counts the sub-user's own lines against its limit.

CREATE TABLE sub_users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  -- A label the customer chooses (their own customer's name, a team, a scraper).
  name text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$'),
  -- One namespace with proxy_credentials.username (the trigger below): a gateway finds either by it.
  username text NOT NULL UNIQUE CHECK (username ~ '^[a-z0-9]{4,32}$'),
  password_enc bytea NOT NULL,
  password_sha256 bytea NOT NULL CHECK (octet_length(password_sha256) = 32),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  -- Concurrent connections across the fleet (each gateway enforces its share); NULL: the plan's cap.
  max_connections integer CHECK (max_connections BETWEEN 1 AND 100000),
  -- Bandwidth cap across the fleet, bytes per second (common/src/throttle.ts's bounds); NULL: none
  -- of its own (the account's cap still covers it).
  bytes_per_second bigint CHECK (bytes_per_second BETWEEN 65536 AND 10000000000),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, name)
);
CREATE INDEX sub_users_account ON sub_users (account_id);

-- proxy_username_free(): created here at first; its one definition is migrations/functions/proxy_username_free.sql (docs/adr/0084).
-- trigger sub_users_username_free: created with its function, migrations/functions/proxy_username_free.sql (docs/adr/0084).
-- trigger proxy_credentials_username_free: created with its function, migrations/functions/proxy_username_free.sql (docs/adr/0084).

-- Gateways learn sub-users with the account's other facts ('account' change: the credential cache
-- reloads the account, with its sub-users, and cuts the live connections of a sub-user that was
-- suspended, deleted or given a new password).
-- trigger change_log_sub_users: created with its function, migrations/functions/change_log_account_settings.sql (docs/adr/0084).

-- Per sub-user and product: the traffic limit (NULL: none, the account's balance is the only
-- ceiling) and what the sub-user has used, folded from its usage lines (lifetime of the sub-user:
-- raising the limit gives more). A row exists once a limit is set or traffic is folded.
CREATE TABLE sub_user_products (
  sub_user_id uuid NOT NULL REFERENCES sub_users (id) ON DELETE CASCADE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  limit_bytes bigint CHECK (limit_bytes >= 0),
  used_bytes bigint NOT NULL DEFAULT 0 CHECK (used_bytes >= 0),
  requests_count bigint NOT NULL DEFAULT 0 CHECK (requests_count >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (sub_user_id, product)
);
CREATE INDEX sub_user_products_account ON sub_user_products (account_id);

-- change_log_sub_user_limit(): created here at first; its one definition is migrations/functions/change_log_sub_user_limit.sql (docs/adr/0084).
-- trigger change_log_sub_user_products: created with its function, migrations/functions/change_log_sub_user_limit.sql (docs/adr/0084).

-- Usage over time per sub-user (the account's usage_hourly already includes these bytes).
CREATE TABLE sub_user_usage_hourly (
  sub_user_id uuid NOT NULL REFERENCES sub_users (id) ON DELETE CASCADE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  hour timestamptz NOT NULL,
  bytes_up bigint NOT NULL DEFAULT 0 CHECK (bytes_up >= 0),
  bytes_down bigint NOT NULL DEFAULT 0 CHECK (bytes_down >= 0),
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  PRIMARY KEY (sub_user_id, product, hour)
);
CREATE INDEX sub_user_usage_hourly_account ON sub_user_usage_hourly (account_id, hour);

-- A gateway's lines per sub-user, beside the account's lines of the same batch (which already
-- include them: these only feed the sub-user's used_bytes and its usage over time).
CREATE TABLE usage_batch_sub_user_lines (
  batch_id bigint NOT NULL REFERENCES usage_batches (id) ON DELETE CASCADE,
  sub_user_id uuid NOT NULL REFERENCES sub_users (id) ON DELETE CASCADE,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  bytes_up bigint NOT NULL DEFAULT 0 CHECK (bytes_up >= 0),
  bytes_down bigint NOT NULL DEFAULT 0 CHECK (bytes_down >= 0),
  requests bigint NOT NULL DEFAULT 0 CHECK (requests >= 0),
  PRIMARY KEY (batch_id, sub_user_id, product)
);

-- A lease drawn for a sub-user's budget holds bytes against the account's balance (as every lease
-- does) and against the sub-user's limit. A deleted sub-user's open leases become plain account
-- leases and are returned as usual.
ALTER TABLE bandwidth_leases ADD COLUMN sub_user_id uuid REFERENCES sub_users (id) ON DELETE SET NULL;
CREATE INDEX bandwidth_leases_sub_user_idx ON bandwidth_leases (sub_user_id, product) WHERE sub_user_id IS NOT NULL;

-- sub_user_leased(): created here at first; its one definition is migrations/functions/sub_user_leased.sql (docs/adr/0084).

-- As in 0080, with p_sub_user: the grant is also capped by what the sub-user's limit leaves
-- (limit - used - what its leases hold). Every draw of an (account, product) locks its balance
-- row first, so draws for the same sub-user are serialised by it; usage_fold takes the balance
-- row before the sub-user's row, the same order. out_sub_user_limited: the sub-user's limit, not
-- the account's balance, decided the answer (out_held is then what the sub-user's leases hold).
-- A sub-user that is not the account's (deleted meanwhile) is denied.
-- lease_acquire(): created here at first; its one definition is migrations/functions/lease_acquire.sql (docs/adr/0084).

-- As in 0020, with p_sub_lines: the batch's lines per sub-user ({sub_user_id, account_id,
-- product, bytes_up, bytes_down, requests}), a sub-user deleted meanwhile dropped. p_lines stays
-- the account's whole usage, sub-users' bytes included.
-- usage_record(): created here at first; its one definition is migrations/functions/usage_record.sql (docs/adr/0084).

-- usage_fold: changed here when this migration was written; its one definition is now migrations/functions/usage_fold.sql (docs/adr/0074), so the restatement is gone.

-- Target statistics per sub-user (docs/adr/0026): '' is the account's own credentials (and IP
-- allowlist), else the sub-user's id. The per-day cap on tracked domains stays per (account,
-- product, day), whoever sent the traffic, so sub-users do not multiply it.
ALTER TABLE target_usage ADD COLUMN sub_user text NOT NULL DEFAULT '' CHECK (sub_user = '' OR sub_user ~ '^[0-9a-f-]{36}$');
ALTER TABLE target_usage DROP CONSTRAINT target_usage_pkey;
ALTER TABLE target_usage ADD PRIMARY KEY (account_id, product, day, sub_user, domain);

-- target_usage_record: changed here when this migration was written; its one definition is now migrations/functions/target_usage_record.sql (docs/adr/0074), so the restatement is gone.
