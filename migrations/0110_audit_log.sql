-- The audit log (docs/security.md "Audit log", docs/adr/0079): every change to an account, written
-- in the same transaction as the change (audit_record in migrations/functions/, recordAudit in
-- common/src/audit/record.ts), read newest first by account. Kept for
-- PROXYFLEET_AUDIT_RETENTION_DAYS (the worker deletes older rows in batches).
CREATE TABLE audit_log (
  id bigserial PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  at timestamptz NOT NULL DEFAULT now(),
  actor_kind text NOT NULL CHECK (actor_kind IN ('api_key', 'dashboard', 'admin', 'system')),
  actor_id text NOT NULL CHECK (length(actor_id) BETWEEN 1 AND 320),
  actor_ip inet,
  -- <resource>.<verb>, e.g. api_key.created, two_factor.enabled, subscription.renewed
  action text NOT NULL CHECK (action ~ '^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$'),
  target_type text,
  target_id text,
  details jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(details) = 'object'),
  CHECK ((target_type IS NULL) = (target_id IS NULL))
);
-- The reads: one account's entries, newest first, paged by id.
CREATE INDEX audit_log_account_id ON audit_log (account_id, id DESC);
-- The retention sweep: the oldest entries first, whatever the account.
CREATE INDEX audit_log_at ON audit_log (at);
