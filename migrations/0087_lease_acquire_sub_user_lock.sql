-- A sub-user deleted while a gateway asks for a lease for it is denied, as migrations/0085 meant,
-- not an error. 0085 checked that the sub-user exists with a plain read, then inserted the lease:
-- a delete committed in between made the insert's foreign key fail (23503), and the gateway took
-- the error for a database outage and could serve that budget on outage credit. Now the check
-- locks the sub-user's row FOR KEY SHARE, the lock the insert's foreign key takes anyway: a delete
-- that came first is waited for and seen (denied); one that comes later waits for this lease,
-- which its cascade then hands to the account (sub_user_id set to NULL). KEY SHARE does not
-- conflict with the FOR NO KEY UPDATE that API updates and deletes take first
-- (api/src/modules/sub-users/repo.ts), so no new lock order. Only that check differs from 0085.
CREATE OR REPLACE FUNCTION lease_acquire(p_account uuid, p_product text, p_gateway text, p_wanted bigint, p_min bigint,
                              p_ttl_seconds integer, p_sub_user uuid DEFAULT NULL)
RETURNS TABLE (out_lease_id uuid, out_granted bigint, out_expires_at timestamptz, out_free bigint, out_held bigint,
               out_sub_user_limited boolean)
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
BEGIN
  SELECT array_agg(x.id ORDER BY x.id) INTO v_dead FROM (
    SELECT l.id FROM bandwidth_leases l JOIN gateway_heartbeats h ON h.gateway_id = l.gateway_id
     WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL
       AND h.beat_at < now() - gateway_dead_after()
     ORDER BY l.id FOR UPDATE OF l) x;
  IF v_dead IS NOT NULL THEN
    PERFORM lease_reclaim(v_dead);
  END IF;

  SELECT greatest(0, b.total_bytes - b.used_bytes - b.leased_bytes), b.leased_bytes INTO v_free, v_held
    FROM balances b WHERE b.account_id = p_account AND b.product = p_product FOR UPDATE;
  IF p_sub_user IS NOT NULL THEN
    PERFORM 1 FROM sub_users s WHERE s.id = p_sub_user AND s.account_id = p_account FOR KEY SHARE;
    IF NOT FOUND THEN
      RETURN QUERY SELECT NULL::uuid, 0::bigint, NULL::timestamptz, 0::bigint, 0::bigint, true;
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
    -- out_held > 0: nothing is free now, but other gateways hold leases they may give back.
    RETURN QUERY SELECT NULL::uuid, 0::bigint, NULL::timestamptz, 0::bigint, coalesce(v_held, 0::bigint), v_limited;
    RETURN;
  END IF;
  SELECT count(DISTINCT l.gateway_id) INTO v_pods FROM bandwidth_leases l
   WHERE l.account_id = p_account AND l.product = p_product AND l.released_at IS NULL AND l.gateway_id <> p_gateway;
  v_grant := least(p_wanted, greatest(p_min, v_free / (2 * (v_pods + 1))), v_free);
  UPDATE balances SET leased_bytes = leased_bytes + v_grant WHERE account_id = p_account AND product = p_product;
  INSERT INTO bandwidth_leases (account_id, product, gateway_id, granted_bytes, expires_at, sub_user_id)
  VALUES (p_account, p_product, p_gateway, v_grant, now() + make_interval(secs => p_ttl_seconds), p_sub_user)
  RETURNING id, expires_at INTO v_id, v_expires;
  RETURN QUERY SELECT v_id, v_grant, v_expires, v_free - v_grant, v_held + v_grant, v_limited;
END $$;
