-- Two-factor sign-in (TOTP, RFC 6238) and the sessions a customer can see and end
-- (docs/security.md "Two-factor sign-in and sessions", docs/adr/0077).

-- One row per account that has started or finished turning two-factor sign-in on. The secret is
-- sealed like the proxy passwords (AES-256-GCM under PROXYFLEET_CREDENTIALS_KEY); enabled_at is
-- null while the customer has not yet confirmed a first code. last_step is the RFC 6238 time step
-- of the last code accepted: a code of that step or an earlier one is refused (no replay).
CREATE TABLE dashboard_two_factor (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  secret_enc bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  enabled_at timestamptz,
  last_step bigint
);

-- Ten single-use recovery codes per enabled account, as HMAC-SHA256 under a key derived from
-- PROXYFLEET_CREDENTIALS_KEY: the codes themselves are shown once and never stored.
CREATE TABLE dashboard_recovery_codes (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  code_hash bytea NOT NULL CHECK (octet_length(code_hash) = 32),
  used_at timestamptz,
  PRIMARY KEY (account_id, code_hash)
);

-- A sign-in whose password was right and whose code is still to come, keyed by the sha256 of the
-- browser's pre-session cookie (the cookie the sign-in form's CSRF token is bound to): the code
-- step works only in the browser that typed the password, and only for a few minutes.
CREATE TABLE dashboard_sign_in_challenges (
  pre_session_hash bytea PRIMARY KEY CHECK (octet_length(pre_session_hash) = 32),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL
);
CREATE INDEX dashboard_sign_in_challenges_account_idx ON dashboard_sign_in_challenges (account_id);

-- Sessions get a public id (the token's hash never leaves the database), the address and the
-- browser they started from, for the Security page's list.
ALTER TABLE dashboard_sessions
  ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
  ADD COLUMN ip inet,
  ADD COLUMN user_agent text CHECK (length(user_agent) <= 512);
