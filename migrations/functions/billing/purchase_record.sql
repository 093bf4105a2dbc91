-- Buys bandwidth (docs/adr/0075), in the caller's transaction: the purchase, the balance, the
-- invoice priced by price_cents, and the new-invoice email when that alert is on. p_settlement
-- says how the invoice is paid: 'deferred' (billed later: the built-in "invoice" method and
-- operator purchases; counted against the credit limit, credit_status) or 'charged' (paid by
-- p_method before the purchase). A key already used on the account returns that purchase's invoice
-- and buys nothing more. Takes no account row lock (the unique index serialises equal keys), so a
-- draw holding a balance row lock may call it. Lock order: the balance row, then the account's
-- credit lock (bill-later only), as draws and folds take them.
CREATE OR REPLACE FUNCTION purchase_record(p_account uuid, p_product text, p_bytes bigint, p_source text, p_key text,
                                           p_settlement text DEFAULT 'deferred', p_method text DEFAULT 'invoice')
RETURNS SETOF invoices LANGUAGE plpgsql AS $$
DECLARE
  v_purchase uuid;
  v_invoice invoices%ROWTYPE;
  v_new_invoice boolean;
BEGIN
  INSERT INTO purchases (account_id, product, bytes, source, idempotency_key, created_at)
  VALUES (p_account, p_product, p_bytes, p_source, p_key, billing_now())
  ON CONFLICT (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING id INTO v_purchase;
  IF v_purchase IS NULL THEN
    RETURN QUERY SELECT i.* FROM invoices i JOIN purchases p ON p.id = i.purchase_id
                  WHERE p.account_id = p_account AND p.idempotency_key = p_key;
    RETURN;
  END IF;
  INSERT INTO balances (account_id, product, total_bytes) VALUES (p_account, p_product, p_bytes)
  ON CONFLICT (account_id, product) DO UPDATE SET total_bytes = balances.total_bytes + EXCLUDED.total_bytes, updated_at = now();
  IF p_settlement = 'deferred' THEN
    PERFORM billing_credit_lock(p_account);
  END IF;
  INSERT INTO invoices (account_id, purchase_id, product, bytes, amount_cents, currency, settlement, payment_method, issued_at)
  SELECT p_account, v_purchase, p_product, p_bytes, pc.cents, pc.currency, p_settlement, p_method, billing_now()
    FROM price_cents(p_product, p_bytes) pc
  RETURNING * INTO v_invoice;
  SELECT s.new_invoice INTO v_new_invoice FROM alert_settings s WHERE s.account_id = p_account;
  IF v_new_invoice IS DISTINCT FROM false THEN
    PERFORM email_enqueue(p_account, 'new_invoice', v_invoice.id::text, jsonb_build_object('invoiceId', v_invoice.id));
  END IF;
  RETURN NEXT v_invoice;
END $$;
