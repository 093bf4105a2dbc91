-- Buys the auto-refill of one crossing (docs/adr/0073), for the caller that holds the balance row
-- lock: the crossing's number names it ('auto-refill:<product>:crossing:<n>', unique per
-- account), so however many draws, folds or sweeps see the crossing, it is bought once.
-- Outcomes: 'exists' (this crossing already has its refill: bought, pending or failed), 'off',
-- 'monthly_cap' (nothing recorded: a later month may still buy it, billing_check), 'credit_limit'
-- (recorded as failed, with the "auto-refill failed" email), 'bought' (bill-later "invoice":
-- purchase, invoice and the new-invoice email now), 'pending' (a method that must charge first:
-- the worker pays it, common/src/billing/refills.ts). A refill bought or refused here goes to the
-- audit log in the same transaction (auto_refill.bought, auto_refill.failed; actor system
-- 'auto-refill'), as refills.ts records the ones it pays.
CREATE OR REPLACE FUNCTION billing_refill(p_account uuid, p_product text, p_crossing integer, p_remaining bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v record;
  v_key text := 'auto-refill:' || p_product || ':crossing:' || p_crossing;
  v_id uuid;
  v_reason text;
  v_invoice invoices%ROWTYPE;
BEGIN
  IF EXISTS (SELECT 1 FROM auto_refills x WHERE x.account_id = p_account AND x.idempotency_key = v_key) THEN
    RETURN 'exists';
  END IF;
  SELECT * INTO v FROM billing_refill_verdict(p_account, p_product);
  IF NOT v.enabled THEN
    RETURN 'off';
  ELSIF v.reason = 'monthly_cap' THEN
    RETURN 'monthly_cap';
  END IF;
  IF v.payment_method = 'invoice' THEN
    -- Decided under the account's credit lock: a concurrent bill-later invoice is counted.
    v_reason := billing_credit_check(p_account, v.price_cents);
    IF v_reason IS NOT NULL THEN
      INSERT INTO auto_refills (account_id, product, idempotency_key, bytes, payment_method, status, error, crossing,
                                remaining_bytes, created_at, decided_at)
      VALUES (p_account, p_product, v_key, v.refill_bytes, v.payment_method, 'failed', v_reason,
              p_crossing, p_remaining, billing_now(), billing_now())
      RETURNING id INTO v_id;
      PERFORM email_enqueue(p_account, 'auto_refill_failed', v_id::text, jsonb_build_object('refillId', v_id));
      PERFORM audit_record(p_account, 'system', 'auto-refill', NULL, 'auto_refill.failed', 'auto_refill', v_id::text,
                           jsonb_build_object('product', p_product, 'bytes', v.refill_bytes,
                                              'paymentMethod', v.payment_method, 'reason', v_reason));
      RETURN 'credit_limit';
    END IF;
    INSERT INTO auto_refills (account_id, product, idempotency_key, bytes, payment_method, status, crossing,
                              remaining_bytes, created_at, decided_at)
    VALUES (p_account, p_product, v_key, v.refill_bytes, v.payment_method, 'succeeded', p_crossing, p_remaining,
            billing_now(), billing_now())
    RETURNING id INTO v_id;
    SELECT * INTO v_invoice FROM purchase_record(p_account, p_product, v.refill_bytes, 'auto_refill', v_key,
                                                 'deferred', 'invoice');
    UPDATE auto_refills SET purchase_id = v_invoice.purchase_id WHERE id = v_id;
    PERFORM audit_record(p_account, 'system', 'auto-refill', NULL, 'auto_refill.bought', 'invoice', v_invoice.id::text,
                         jsonb_build_object('product', p_product, 'bytes', v.refill_bytes,
                                            'invoiceNumber', v_invoice.number, 'amountCents', v_invoice.amount_cents,
                                            'currency', v_invoice.currency, 'paymentMethod', v.payment_method));
    RETURN 'bought';
  END IF;
  INSERT INTO auto_refills (account_id, product, idempotency_key, bytes, payment_method, status, crossing,
                            remaining_bytes, created_at)
  VALUES (p_account, p_product, v_key, v.refill_bytes, v.payment_method, 'pending', p_crossing, p_remaining, billing_now());
  RETURN 'pending';
END $$;
