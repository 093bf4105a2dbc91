-- The customer dashboard (docs/adr/0050): its password, sessions, one-time links and sign-in
-- throttling. Secrets are stored as hashes only: scrypt for passwords, sha256 for the random
-- session and link tokens (256 bits each, so a fast hash is enough).

CREATE TABLE dashboard_credentials (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  -- scrypt$<N>$<r>$<p>$<salt base64>$<hash base64>
  password_hash text NOT NULL CHECK (password_hash LIKE 'scrypt$%'),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Sessions live here so every API process shares them and a sign-out or password change ends
-- them everywhere at once. Idle expiry: last_seen_at; absolute expiry: expires_at.
CREATE TABLE dashboard_sessions (
  token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX dashboard_sessions_account_idx ON dashboard_sessions (account_id);
CREATE INDEX dashboard_sessions_expires_idx ON dashboard_sessions (expires_at);

-- One-time links: an invite (from the admin API) or a password reset (from "Forgot password?").
CREATE TABLE dashboard_tokens (
  token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  purpose text NOT NULL CHECK (purpose IN ('invite', 'reset')),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX dashboard_tokens_account_idx ON dashboard_tokens (account_id);

-- Failed sign-ins, one row each, counted per bucket ('email:<lower email>', 'ip:<address>') in a
-- sliding window. Rows older than the window are deleted on the next failure of their bucket.
CREATE TABLE dashboard_login_failures (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  bucket text NOT NULL,
  failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dashboard_login_failures_bucket_idx ON dashboard_login_failures (bucket, failed_at);

-- The invite and reset emails go through the outbox like every alert. Their kinds are added to
-- whatever the kind constraint allows when this runs (other migrations may have added kinds).
DO $$
DECLARE
  def text;
  kinds text[];
BEGIN
  SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
   WHERE conrelid = 'email_outbox'::regclass AND conname = 'email_outbox_kind_check';
  SELECT coalesce(array_agg(DISTINCT m[1]), '{}') INTO kinds FROM regexp_matches(coalesce(def, ''), '[''{,]([a-z_]+)(?=[''},])', 'g') AS m;
  kinds := kinds || ARRAY['dashboard_invite', 'dashboard_reset'];
  IF def IS NOT NULL THEN
    ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_kind_check;
  END IF;
  EXECUTE format('ALTER TABLE email_outbox ADD CONSTRAINT email_outbox_kind_check CHECK (kind = ANY (%L::text[]))', kinds);
END $$;

-- email_outbox_redact_links(): created here at first; its one definition is migrations/functions/email_outbox_redact_links.sql (docs/adr/0084).
-- trigger email_outbox_redact_links: created with its function, migrations/functions/email_outbox_redact_links.sql (docs/adr/0084).
