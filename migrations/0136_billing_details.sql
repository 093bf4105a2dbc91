-- What a customer's invoices name them by (the Billing page's "Billing details"; the invoice PDF):
-- company, postal address (lines), VAT id. No row: the invoice names the account's email.
CREATE TABLE account_billing_details (
  account_id uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
  company text NOT NULL DEFAULT '' CHECK (length(company) <= 200),
  address text NOT NULL DEFAULT '' CHECK (length(address) <= 1000),
  vat_id text NOT NULL DEFAULT '' CHECK (length(vat_id) <= 50),
  updated_at timestamptz NOT NULL DEFAULT now()
);
