-- Security notices (docs/alerts.md "Security notices"): an email for every two-factor change and
-- for a sign-in from a browser the account has not signed in from before. The kind is added to
-- whatever the outbox's kind constraint allows when this runs (other migrations may add kinds).
DO $$
DECLARE
  def text;
  kinds text[];
BEGIN
  SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
   WHERE conrelid = 'email_outbox'::regclass AND conname = 'email_outbox_kind_check';
  SELECT coalesce(array_agg(DISTINCT m[1]), '{}') INTO kinds FROM regexp_matches(coalesce(def, ''), '[''{,]([a-z_]+)(?=[''},])', 'g') AS m;
  kinds := kinds || ARRAY['security_notice'];
  IF def IS NOT NULL THEN
    ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_kind_check;
  END IF;
  EXECUTE format('ALTER TABLE email_outbox ADD CONSTRAINT email_outbox_kind_check CHECK (kind = ANY (%L::text[]))', kinds);
END $$;

-- The browsers an account has signed in from: the sha256 of a long-lived random cookie set at
-- sign-in. A sign-in whose browser is not here (and the account has one already) is emailed.
CREATE TABLE dashboard_known_browsers (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  browser_hash bytea NOT NULL,
  first_seen_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, browser_hash)
);
