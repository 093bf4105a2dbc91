-- One audit entry (docs/security.md "Audit log"), written in the caller's transaction so that the
-- change and its entry commit or roll back together. SQL functions that change an account (the
-- auto-refill in billing_refill) call it directly; TypeScript calls it through recordAudit
-- (common/src/audit/record.ts). `at` is the billing clock (billing_now: the database's now() in
-- production), so entries and the billing events they describe share one clock in tests.
-- p_details must never hold a secret (a key, password, token, TOTP secret or recovery code).
CREATE OR REPLACE FUNCTION audit_record(
  p_account uuid,
  p_actor_kind text,
  p_actor_id text,
  p_actor_ip inet,
  p_action text,
  p_target_type text,
  p_target_id text,
  p_details jsonb
) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO audit_log (account_id, at, actor_kind, actor_id, actor_ip, action, target_type, target_id, details)
  VALUES (p_account, billing_now(), p_actor_kind, p_actor_id, p_actor_ip, p_action, p_target_type, p_target_id,
          coalesce(p_details, '{}'::jsonb))
$$;
