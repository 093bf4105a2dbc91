-- Invoices are settled (docs/adr/0101): an operator marks a bill-later invoice paid or void, and
-- the moment is kept. A paid invoice has paid_at, a void one voided_at, an issued one neither;
-- the credit limit counts only issued (unpaid) bill-later invoices (credit_status).
ALTER TABLE invoices
  ADD COLUMN paid_at timestamptz,
  ADD COLUMN voided_at timestamptz,
  -- What voiding a purchase's invoice took back from the balance (its unused part), for the record.
  ADD COLUMN voided_bytes bigint CHECK (voided_bytes >= 0);
-- Invoices from before this migration that were already paid or void have no moment: their issue time stands in.
UPDATE invoices SET paid_at = issued_at WHERE status = 'paid';
UPDATE invoices SET voided_at = issued_at, voided_bytes = 0 WHERE status = 'void';
ALTER TABLE invoices ADD CONSTRAINT invoices_settled_at CHECK (
  (status = 'issued' AND paid_at IS NULL AND voided_at IS NULL)
  OR (status = 'paid' AND paid_at IS NOT NULL AND voided_at IS NULL)
  OR (status = 'void' AND voided_at IS NOT NULL AND paid_at IS NULL));
-- The operators' list of every account's invoices by status, newest first.
CREATE INDEX invoices_status_number_idx ON invoices (status, number);

-- Customers buy for themselves (POST /api/v1/purchases, the dashboard's "Buy bandwidth").
ALTER TABLE purchases DROP CONSTRAINT purchases_source_check,
  ADD CONSTRAINT purchases_source_check CHECK (source IN ('admin', 'auto_refill', 'renewal', 'customer'));
