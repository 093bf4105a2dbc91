-- The one way to queue an email (docs/alerts.md, docs/adr/0075), for SQL and TypeScript writers
-- alike: the dedupe key is <kind>:<key> and the Message-ID <<kind>.<key with ':' as '.'>@proxyfleet>,
-- one-to-one with it (keys are words of [A-Za-z0-9_-] joined by ':'). Alerts pass a payload naming
-- their cause and are rendered when sent; messages rendered by their producer pass subject and
-- body. The address is the account's email at queue time. Returns the row's id, NULL when an email
-- with that key was queued before (or the account is gone).
CREATE OR REPLACE FUNCTION email_enqueue(p_account uuid, p_kind text, p_key text, p_payload jsonb DEFAULT NULL,
                                         p_subject text DEFAULT NULL, p_body text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_id bigint;
BEGIN
  IF p_key IS NULL OR p_key !~ '^[A-Za-z0-9_-]+(:[A-Za-z0-9_-]+)*$' THEN
    RAISE EXCEPTION 'email key % must be words of [A-Za-z0-9_-] joined by ":"', p_key USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO email_outbox (account_id, kind, dedupe_key, to_address, payload, subject, body_text, message_id)
  SELECT p_account, p_kind, p_kind || ':' || p_key, a.email, p_payload, p_subject, p_body,
         '<' || p_kind || '.' || translate(p_key, ':', '.') || '@proxyfleet>'
    FROM accounts a WHERE a.id = p_account
  ON CONFLICT (dedupe_key) DO NOTHING
  RETURNING id INTO v_id;
  RETURN v_id;
END $$;
