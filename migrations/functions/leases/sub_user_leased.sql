-- What a sub-user's leases still hold on a product (the same arithmetic as balances.leased_bytes,
-- migrations/0020: an open lease holds granted - charged, a released one its unfolded spends).
CREATE OR REPLACE FUNCTION sub_user_leased(p_sub_user uuid, p_product text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT coalesce(sum(CASE WHEN l.released_at IS NULL THEN l.granted_bytes - l.charged_bytes
                           ELSE greatest(0, least(l.spent_bytes, l.granted_bytes) - l.charged_bytes) END), 0)::bigint
    FROM bandwidth_leases l
   WHERE l.sub_user_id = p_sub_user AND l.product = p_product
     AND (l.released_at IS NULL OR l.charged_bytes < least(l.spent_bytes, l.granted_bytes))
$$;
