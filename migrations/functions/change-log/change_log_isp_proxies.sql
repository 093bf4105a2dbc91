-- An ISP proxy assigned, changed or removed.
CREATE OR REPLACE FUNCTION change_log_isp_proxies() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM change_log_record('isp_proxy', OLD.account_id, OLD.id::text);
    RETURN OLD;
  END IF;
  PERFORM change_log_record('isp_proxy', NEW.account_id, NEW.id::text);
  RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER change_log_isp_proxies AFTER INSERT OR UPDATE OR DELETE ON isp_proxies
  FOR EACH ROW EXECUTE FUNCTION change_log_isp_proxies();
