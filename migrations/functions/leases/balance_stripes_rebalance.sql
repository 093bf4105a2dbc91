-- Re-levels a hot balance's stripes (docs/adr/0107), one short transaction of the worker's
-- balance-stripes job per balance (balance_stripes_due): with the balance row locked, every stripe
-- row no draw or release holds now (SKIP LOCKED: it never waits for one) is set to the same free
-- bytes t. Opened while at least min_gateways gateways hold open leases on it (the stripe rows are
-- made then), closed when fewer do or when there is no room.
--
-- Room: what remains (total - billing_used) less what the balance row's leases hold, less the
-- highest threshold billing decides on (auto-refill when on, the low-bandwidth alert when on),
-- less one byte. The stripes together (striped_bytes: their free plus what their leases hold)
-- never pass it: even with every lease and every stripe spent, remaining stays above every
-- threshold, so a draw from a stripe has no billing decision to make. Only what no lease may take
-- (the overdraft of docs/adr/0020) or a threshold raised can cross one meanwhile; the fold and
-- the sweep decide then, as before, and the next re-levelling closes the stripes. t is half of
-- what is left of the room over what the stripes' leases hold, split over the stripes (the other
-- half stays on the balance row for its own draws: sub-users, and draws that find the stripes
-- busy), and never more than the room allows for the rows it could lock. stripes_open: t > 0.
-- Lock order: the balance row, then its stripes by number.
CREATE OR REPLACE FUNCTION balance_stripes_rebalance(p_account uuid, p_product text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  k record;
  b balances%ROWTYPE;
  v_gateways integer;
  v_threshold bigint;
  v_room bigint := -1;
  v_stripes smallint[] := '{}';
  v_locked_free bigint := 0;
  v_held bigint;
  v_t bigint := 0;
  r record;
BEGIN
  SELECT * INTO k FROM balance_stripe_count();
  SELECT * INTO b FROM balances WHERE account_id = p_account AND product = p_product FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  SELECT count(DISTINCT l.gateway_id) INTO v_gateways FROM bandwidth_leases l
   WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL;
  IF v_gateways >= k.min_gateways THEN
    SELECT greatest(
             coalesce((SELECT s.threshold_bytes FROM auto_refill_settings s
                        WHERE s.account_id = p_account AND s.product = p_product AND s.enabled), 0),
             coalesce((SELECT a.threshold_bytes FROM billing_alert_state(p_account, p_product) a WHERE a.alert_on), 0))
      INTO v_threshold;
    v_room := b.total_bytes - billing_used(b.used_bytes, b.reported_used_bytes) - b.leased_bytes - v_threshold - 1;
    IF v_room > 0 THEN
      INSERT INTO balance_stripes (account_id, product, stripe)
      SELECT p_account, p_product, n FROM generate_series(0, k.stripes - 1) n
      ON CONFLICT DO NOTHING;
    END IF;
  END IF;
  FOR r IN
    SELECT x.stripe, x.free_bytes FROM balance_stripes x
     WHERE x.account_id = p_account AND x.product = p_product
     ORDER BY x.stripe FOR UPDATE SKIP LOCKED
  LOOP
    v_stripes := v_stripes || r.stripe;
    v_locked_free := v_locked_free + r.free_bytes;
  END LOOP;
  IF cardinality(v_stripes) = 0 THEN
    UPDATE balances SET stripes_open = false
     WHERE account_id = p_account AND product = p_product AND stripes_open AND b.striped_bytes >= v_room;
    RETURN 0;
  END IF;
  IF v_room > 0 THEN
    -- What the stripes' leases hold: exact for the rows locked here, as last committed for the others.
    SELECT b.striped_bytes - coalesce(sum(x.free_bytes), 0) INTO v_held FROM balance_stripes x
     WHERE x.account_id = p_account AND x.product = p_product;
    v_t := greatest(0, least((v_room - v_held) / 2 / k.stripes,
                             (v_room - b.striped_bytes + v_locked_free) / cardinality(v_stripes)));
  END IF;
  UPDATE balance_stripes SET free_bytes = v_t
   WHERE account_id = p_account AND product = p_product AND stripe = ANY (v_stripes) AND free_bytes <> v_t;
  UPDATE balances
     SET striped_bytes = striped_bytes - v_locked_free + v_t * cardinality(v_stripes), stripes_open = v_t > 0
   WHERE account_id = p_account AND product = p_product;
  RETURN v_t;
END $$;
