-- A gateway draws a bandwidth lease for (account, product) (docs/adr/0020): it grants
-- least(wanted, greatest(min, free / (2 x (gateways holding a lease + 1))), free) where
-- free = total - used - leased: leases shrink near zero, never fall below the minimum unless less is
-- free (then all of it: progress without 1-byte grants), and never exceed what is free. With
-- nothing free it grants nothing and says how much leases still hold (out_held).
--
-- In order: the lease rows it touches are locked first, by id (the order of usage_record and
-- usage_fold: lease rows before the balance row): the leases of dead gateways on this balance,
-- reclaimed (docs/adr/0025), and this gateway's open leases named in p_spends
-- ([{lease_id, spent}]: what it has relayed on each so far), whose reported_bytes rise to it, so
-- the draw reports usage the worker has not folded yet; then the balance row; then billing has its
-- say through one door, billing_on_draw (docs/adr/0073: an auto-refill is bought before traffic
-- stops); then the grant.
--
-- A hot balance's stripes come first (docs/adr/0107): an account's own draw (not a sub-user's,
-- whose limit the balance row's lock keeps exact) takes from one stripe row if one is open, has at
-- least p_min free and is not held by another (lease_stripe_draw), and the balance row is not
-- locked at all. Else the draw is on the balance row as above; when its free (total - used -
-- leased - striped) is less than wanted, the stripes' free bytes come back to it first
-- (balance_stripes_drain, after the balance row: the lock order), so a denial or a shrunken grant
-- sees every free byte.
--
-- p_sub_user: a sub-user's budget (docs/adr/0037): the grant is also capped by what its limit
-- leaves (limit - used - what its leases hold); out_sub_user_limited says the limit, not the
-- balance, decided (out_held is then what the sub-user's leases hold). A sub-user that is not the
-- account's (deleted meanwhile) is denied: its row is locked FOR KEY SHARE, the lock the lease's
-- foreign key takes anyway, so a delete that came first is seen and one that comes later waits for
-- this lease (KEY SHARE does not conflict with the API's FOR NO KEY UPDATE: no new lock order).
--
-- A denial while other gateways' leases hold bytes asks them to give back what they do not need
-- (a 'give_back' change, at most once a second per balance; docs/adr/0073), and says so
-- (out_others_hold: the denied gateway may wait for them).
CREATE OR REPLACE FUNCTION lease_acquire(p_account uuid, p_product text, p_gateway text, p_wanted bigint, p_min bigint,
                              p_ttl_seconds integer, p_sub_user uuid DEFAULT NULL, p_spends jsonb DEFAULT '[]')
RETURNS TABLE (out_lease_id uuid, out_granted bigint, out_expires_at timestamptz, out_free bigint, out_held bigint,
               out_sub_user_limited boolean, out_others_hold boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_free bigint;
  v_held bigint;
  v_pods integer;
  v_grant bigint;
  v_id uuid;
  v_expires timestamptz;
  v_dead uuid[];
  v_limit bigint;
  v_sub_free bigint;
  v_limited boolean := false;
  v_others boolean := false;
BEGIN
  SELECT array_agg(x.id ORDER BY x.id) FILTER (WHERE x.dead) INTO v_dead FROM (
    SELECT l.id, coalesce(h.beat_at < now() - gateway_dead_after(), false) AS dead
      FROM bandwidth_leases l LEFT JOIN gateway_heartbeats h ON h.gateway_id = l.gateway_id
     WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL
       AND (h.beat_at < now() - gateway_dead_after()
            OR (l.gateway_id = p_gateway
                AND l.id IN (SELECT e.lease_id FROM jsonb_to_recordset(p_spends) AS e (lease_id uuid))))
     ORDER BY l.id FOR UPDATE OF l) x;
  IF v_dead IS NOT NULL THEN
    PERFORM lease_reclaim(v_dead);
  END IF;
  UPDATE bandwidth_leases l SET reported_bytes = least(e.spent, l.granted_bytes)
    FROM jsonb_to_recordset(p_spends) AS e (lease_id uuid, spent bigint)
   WHERE l.id = e.lease_id AND l.gateway_id = p_gateway AND l.account_id = p_account AND l.product = p_product
     AND l.released_at IS NULL AND least(e.spent, l.granted_bytes) > l.reported_bytes;

  IF p_sub_user IS NULL THEN
    RETURN QUERY SELECT d.out_lease_id, d.out_granted, d.out_expires_at, d.out_free, d.out_held, false, false
                   FROM lease_stripe_draw(p_account, p_product, p_gateway, p_wanted, p_min, p_ttl_seconds) d;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;

  SELECT greatest(0, b.total_bytes - b.used_bytes - b.leased_bytes - b.striped_bytes) INTO v_free
    FROM balances b WHERE b.account_id = p_account AND b.product = p_product FOR UPDATE;
  IF FOUND THEN
    IF v_free < p_wanted THEN
      PERFORM balance_stripes_drain(p_account, p_product);
    END IF;
    PERFORM billing_on_draw(p_account, p_product, p_min);
  END IF;
  SELECT greatest(0, b.total_bytes - b.used_bytes - b.leased_bytes - b.striped_bytes),
         b.leased_bytes + b.striped_bytes - (SELECT coalesce(sum(x.free_bytes), 0) FROM balance_stripes x
                                              WHERE x.account_id = p_account AND x.product = p_product)::bigint
    INTO v_free, v_held
    FROM balances b WHERE b.account_id = p_account AND b.product = p_product;
  IF p_sub_user IS NOT NULL THEN
    PERFORM 1 FROM sub_users s WHERE s.id = p_sub_user AND s.account_id = p_account FOR KEY SHARE;
    IF NOT FOUND THEN
      RETURN QUERY SELECT NULL::uuid, 0::bigint, NULL::timestamptz, 0::bigint, 0::bigint, true, false;
      RETURN;
    END IF;
    SELECT p.limit_bytes - p.used_bytes INTO v_limit FROM sub_user_products p
     WHERE p.sub_user_id = p_sub_user AND p.product = p_product AND p.limit_bytes IS NOT NULL;
    IF v_limit IS NOT NULL THEN
      v_sub_free := greatest(0, v_limit - sub_user_leased(p_sub_user, p_product));
      IF v_sub_free < coalesce(v_free, 0) THEN
        v_free := v_sub_free;
        v_held := sub_user_leased(p_sub_user, p_product);
        v_limited := true;
      END IF;
    END IF;
  END IF;
  IF v_free IS NULL OR v_free = 0 THEN
    -- out_held > 0: nothing is free now, but leases hold bytes; other gateways' may come back.
    IF NOT v_limited AND coalesce(v_held, 0) > 0 THEN
      v_others := lease_give_back_request(p_account, p_product, p_gateway);
    END IF;
    RETURN QUERY SELECT NULL::uuid, 0::bigint, NULL::timestamptz, 0::bigint, coalesce(v_held, 0::bigint), v_limited, v_others;
    RETURN;
  END IF;
  SELECT count(DISTINCT l.gateway_id) INTO v_pods FROM bandwidth_leases l
   WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL AND l.gateway_id <> p_gateway;
  v_grant := least(p_wanted, greatest(p_min, v_free / (2 * (v_pods + 1))), v_free);
  UPDATE balances SET leased_bytes = leased_bytes + v_grant WHERE account_id = p_account AND product = p_product;
  INSERT INTO bandwidth_leases (account_id, product, gateway_id, granted_bytes, expires_at, sub_user_id)
  VALUES (p_account, p_product, p_gateway, v_grant, now() + make_interval(secs => p_ttl_seconds), p_sub_user)
  RETURNING id, expires_at INTO v_id, v_expires;
  RETURN QUERY SELECT v_id, v_grant, v_expires, v_free - v_grant, v_held + v_grant, v_limited, false;
END $$;
