-- A one-time link must not stay readable in the outbox once it has been handed to SMTP.
CREATE OR REPLACE FUNCTION email_outbox_redact_links() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.body_text := '[sent; the one-time link it carried is not kept]';
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER email_outbox_redact_links BEFORE UPDATE OF status ON email_outbox
  FOR EACH ROW WHEN (NEW.status IN ('sent', 'failed') AND NEW.kind IN ('dashboard_invite', 'dashboard_reset'))
  EXECUTE FUNCTION email_outbox_redact_links();
