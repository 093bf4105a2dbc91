-- The billing room's door for a gateway's draw (docs/adr/0073), called by lease_acquire with the
-- balance row locked, after it recorded what the drawing gateway reported relaying on its open
-- leases: the known usage rises (billing_note_usage), and billing_check decides when it rose or
-- when the draw finds less free than its minimum lease (free on the balance row: the caller took
-- back its stripes' free bytes first when it had too little, docs/adr/0107).
CREATE OR REPLACE FUNCTION billing_on_draw(p_account uuid, p_product text, p_min bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_rose boolean;
  v_free bigint;
BEGIN
  v_rose := billing_note_usage(p_account, p_product);
  SELECT greatest(0, b.total_bytes - b.used_bytes - b.leased_bytes - b.striped_bytes) INTO v_free
    FROM balances b WHERE b.account_id = p_account AND b.product = p_product;
  IF v_rose OR v_free < p_min THEN
    PERFORM billing_check(p_account, p_product, v_free, p_min);
  END IF;
END $$;
