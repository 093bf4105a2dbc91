-- Billing, finished (docs/adr/0040, 0041): prices, purchases through one SQL function, auto-refill
-- and the low-bandwidth alert decided where the balance is decided (when a gateway draws a lease),
-- and emails rendered by the worker when they are sent.

-- Price per GB per product; the worker writes its configuration here at start
-- (PROXYFLEET_PRICES_PER_GB), these are the documented defaults. Invoices keep the amount they
-- were issued with.
CREATE TABLE product_prices (
  product text PRIMARY KEY REFERENCES products (name),
  cents_per_gb numeric NOT NULL CHECK (cents_per_gb >= 0),
  currency text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO product_prices (product, cents_per_gb) VALUES
  ('light', 100), ('basic', 200), ('advanced', 300), ('mobile', 800), ('datacenter', 50);

-- Which payment method pays an account's refills of a product ("invoice": bill later, built in).
ALTER TABLE auto_refill_settings
  ADD COLUMN payment_method text NOT NULL DEFAULT 'invoice' CHECK (payment_method ~ '^[a-z][a-z0-9_-]{0,31}$');
-- Older rows may break it; new writes may not (the API validates too).
ALTER TABLE auto_refill_settings
  ADD CONSTRAINT auto_refill_threshold_below_refill CHECK (threshold_bytes < refill_bytes) NOT VALID;

-- One row per crossing of an auto-refill threshold: idempotency_key names the crossing (the
-- product and the purchased level total_bytes at which it was crossed), so concurrent draws of
-- several gateways, a re-run sweep and a worker killed mid-refill all come to one refill.
CREATE TABLE auto_refills (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  idempotency_key text NOT NULL,
  bytes bigint NOT NULL CHECK (bytes > 0),
  payment_method text NOT NULL,
  -- pending: a method that must charge before the bandwidth is granted (the worker runs it).
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  purchase_id uuid REFERENCES purchases (id) ON DELETE SET NULL,
  error text,
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  decided_at timestamptz,
  UNIQUE (account_id, idempotency_key)
);
CREATE INDEX auto_refills_month_idx ON auto_refills (account_id, product, created_at);
CREATE INDEX auto_refills_pending_idx ON auto_refills (next_attempt_at) WHERE status = 'pending';

-- Low-bandwidth alert state per balance: armed until a crossing sends the alert, re-armed when a
-- purchase lifts the remaining bandwidth back above the threshold.
CREATE TABLE low_bandwidth_state (
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  product text NOT NULL REFERENCES products (name),
  armed boolean NOT NULL DEFAULT true,
  crossings integer NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, product)
);

-- Emails whose text the worker renders when it sends them, from payload and the state of that
-- moment (so subject and body agree, and an alert that no longer holds is dropped).
ALTER TABLE email_outbox ALTER COLUMN subject DROP NOT NULL, ALTER COLUMN body_text DROP NOT NULL,
  ADD COLUMN payload jsonb,
  ADD CONSTRAINT email_outbox_text_or_payload CHECK ((subject IS NOT NULL AND body_text IS NOT NULL) OR payload IS NOT NULL);
ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_kind_check,
  ADD CONSTRAINT email_outbox_kind_check CHECK (kind IN ('low_bandwidth', 'new_invoice', 'server_alert', 'auto_refill_failed'));
ALTER TABLE email_outbox DROP CONSTRAINT email_outbox_status_check,
  ADD CONSTRAINT email_outbox_status_check CHECK (status IN ('pending', 'sent', 'failed', 'dropped'));

-- purchase_record(): created here at first; its one definition is migrations/functions/purchase_record.sql (docs/adr/0084).

-- Re-arms the low-bandwidth alert when a purchase lifts the remaining bandwidth above its
-- threshold (the balance row is locked by the purchase's update).
CREATE FUNCTION low_bandwidth_rearm() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_percent integer;
BEGIN
  SELECT s.low_bandwidth_percent INTO v_percent FROM alert_settings s WHERE s.account_id = NEW.account_id;
  IF (NEW.total_bytes - NEW.used_bytes - NEW.leased_bytes) * 100 > NEW.total_bytes * coalesce(v_percent, 10) THEN
    UPDATE low_bandwidth_state SET armed = true WHERE account_id = NEW.account_id AND product = NEW.product AND NOT armed;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER low_bandwidth_rearm AFTER UPDATE OF total_bytes ON balances
  FOR EACH ROW WHEN (NEW.total_bytes > OLD.total_bytes) EXECUTE FUNCTION low_bandwidth_rearm();

-- The decision, for one balance whose row the caller has locked: remaining = total - used -
-- leased (what gateways can still be granted). Below the auto-refill threshold: one refill per
-- crossing, at most max_refills_per_month per calendar month (UTC); the built-in "invoice" method
-- buys at once, any other method is left 'pending' for the worker (docs/adr/0040). Then, on what
-- remains: the low-bandwidth alert, once per crossing.
CREATE FUNCTION balance_check(p_account uuid, p_product text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  b balances%ROWTYPE;
  r auto_refill_settings%ROWTYPE;
  v_remaining bigint;
  v_month integer;
  v_key text;
  v_id uuid;
  v_low boolean;
  v_percent integer;
  v_crossing integer;
BEGIN
  SELECT * INTO b FROM balances WHERE account_id = p_account AND product = p_product;
  IF NOT FOUND OR b.total_bytes = 0 THEN
    RETURN;
  END IF;
  v_remaining := b.total_bytes - b.used_bytes - b.leased_bytes;

  SELECT * INTO r FROM auto_refill_settings WHERE account_id = p_account AND product = p_product AND enabled;
  IF FOUND AND v_remaining < r.threshold_bytes THEN
    SELECT count(*) INTO v_month FROM auto_refills
     WHERE account_id = p_account AND product = p_product AND status IN ('pending', 'succeeded')
       AND created_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    IF v_month < r.max_refills_per_month THEN
      v_key := 'auto-refill:' || p_product || ':' || b.total_bytes;
      INSERT INTO auto_refills (account_id, product, idempotency_key, bytes, payment_method, status)
      VALUES (p_account, p_product, v_key, r.refill_bytes, r.payment_method,
              CASE WHEN r.payment_method = 'invoice' THEN 'succeeded' ELSE 'pending' END)
      ON CONFLICT (account_id, idempotency_key) DO NOTHING
      RETURNING id INTO v_id;
      IF v_id IS NOT NULL AND r.payment_method = 'invoice' THEN
        UPDATE auto_refills SET purchase_id = (SELECT purchase_id FROM purchase_record(p_account, p_product, r.refill_bytes, 'auto_refill', v_key)),
               decided_at = now()
         WHERE id = v_id;
        SELECT * INTO b FROM balances WHERE account_id = p_account AND product = p_product;
        v_remaining := b.total_bytes - b.used_bytes - b.leased_bytes;
      ELSIF v_id IS NOT NULL THEN
        PERFORM pg_notify('proxyfleet_auto_refill', v_id::text);
      END IF;
    END IF;
  END IF;

  SELECT s.low_bandwidth, s.low_bandwidth_percent INTO v_low, v_percent FROM alert_settings s WHERE s.account_id = p_account;
  IF v_low AND v_remaining * 100 <= b.total_bytes * v_percent THEN
    INSERT INTO low_bandwidth_state (account_id, product, armed, crossings) VALUES (p_account, p_product, false, 1)
    ON CONFLICT (account_id, product) DO UPDATE SET armed = false, crossings = low_bandwidth_state.crossings + 1
     WHERE low_bandwidth_state.armed
    RETURNING crossings INTO v_crossing;
    IF v_crossing IS NOT NULL THEN
      INSERT INTO email_outbox (account_id, kind, dedupe_key, to_address, payload, message_id)
      SELECT p_account, 'low_bandwidth', 'low_bandwidth:' || p_account || ':' || p_product || ':' || v_crossing, a.email,
             jsonb_build_object('product', p_product, 'crossing', v_crossing),
             '<low-bandwidth-' || p_account || '-' || p_product || '-' || v_crossing || '@proxyfleet>'
        FROM accounts a WHERE a.id = p_account
      ON CONFLICT (dedupe_key) DO NOTHING;
    END IF;
  END IF;
END $$;

-- A gateway's draw (lease_acquire raises leased_bytes under the balance row lock) runs the
-- check in its own transaction: whatever the lease client looks like, a draw cannot outrun it.
CREATE FUNCTION balance_check_on_draw() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM balance_check(NEW.account_id, NEW.product);
  RETURN NULL;
END $$;
CREATE TRIGGER balance_check_on_draw AFTER UPDATE OF leased_bytes ON balances
  FOR EACH ROW WHEN (NEW.leased_bytes > OLD.leased_bytes) EXECUTE FUNCTION balance_check_on_draw();

-- The worker's sweep for what no draw sees (a balance already dry when auto-refill is turned on,
-- a new month, usage folded past the lease): locks each candidate row, then decides as a draw would.
CREATE FUNCTION balance_sweep(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  c record;
  n integer := 0;
BEGIN
  FOR c IN
    SELECT b.account_id, b.product FROM balances b
      LEFT JOIN auto_refill_settings r ON r.account_id = b.account_id AND r.product = b.product AND r.enabled
      LEFT JOIN alert_settings s ON s.account_id = b.account_id AND s.low_bandwidth
      LEFT JOIN low_bandwidth_state st ON st.account_id = b.account_id AND st.product = b.product
     WHERE b.total_bytes > 0
       AND ((r.account_id IS NOT NULL AND b.total_bytes - b.used_bytes - b.leased_bytes < r.threshold_bytes
             AND NOT EXISTS (SELECT 1 FROM auto_refills x WHERE x.account_id = b.account_id
                              AND x.idempotency_key = 'auto-refill:' || b.product || ':' || b.total_bytes)
             -- Capped for the month: not a candidate (else they would fill every batch).
             AND (SELECT count(*) FROM auto_refills x WHERE x.account_id = b.account_id AND x.product = b.product
                     AND x.status IN ('pending', 'succeeded')
                     AND x.created_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') < r.max_refills_per_month)
         OR (s.account_id IS NOT NULL AND coalesce(st.armed, true)
             AND (b.total_bytes - b.used_bytes - b.leased_bytes) * 100 <= b.total_bytes * s.low_bandwidth_percent))
     ORDER BY b.account_id, b.product
     LIMIT p_limit
  LOOP
    PERFORM 1 FROM balances WHERE account_id = c.account_id AND product = c.product FOR UPDATE;
    PERFORM balance_check(c.account_id, c.product);
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;
