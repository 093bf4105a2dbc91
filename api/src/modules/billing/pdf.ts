// An invoice a customer can file (docs/api.md "GET /api/v1/invoices/:id/pdf", docs/adr/0092): one
// A4 page rendered by pdfkit with the seller's details (PROXYFLEET_SELLER_*), the customer's billing
// details (the Billing page), number, dates, the line, amount, currency and status. The same
// bytes for the same invoice and details: the document's dates are the invoice's own.
import PDFDocument from 'pdfkit';
import type { Pool } from '#common/db/pool.ts';
import { readInvoice, type InvoiceView } from '#common/billing/invoices.ts';
import { bandwidthText } from '#common/billing/remaining.ts';
import { readBillingDetails, type BillingDetails } from './details.ts';

export interface Seller {
  name: string;
  addressLines: string[];
  taxId: string;
}

/** "\n" written as two characters in an environment variable is a line break too. */
export function sellerFromConfig(config: {
  PROXYFLEET_SELLER_NAME: string;
  PROXYFLEET_SELLER_ADDRESS: string;
  PROXYFLEET_SELLER_TAX_ID: string;
}): Seller {
  return {
    name: config.PROXYFLEET_SELLER_NAME,
    addressLines: lines(config.PROXYFLEET_SELLER_ADDRESS.replaceAll('\\n', '\n')),
    taxId: config.PROXYFLEET_SELLER_TAX_ID.trim(),
  };
}

const lines = (text: string) =>
  text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);

/**
 * The PDF's standard fonts (Helvetica, no font embedded) write WinAnsi, about Latin-1: a
 * character outside it would come out as another glyph, so it is written as "?" instead.
 */
export function winAnsi(text: string): string {
  return text.replace(/[^\x20-\x7e\u00a0-\u00ff]/g, '?');
}

/** Whole cents as "1,234.56 USD", without a float. */
export function moneyText(cents: number, currency: string): string {
  const units = Math.trunc(cents / 100).toLocaleString('en-US');
  return `${units}.${String(cents % 100).padStart(2, '0')} ${currency}`;
}

const day = (iso: string) => iso.slice(0, 10);

function statusLine(i: InvoiceView): string {
  if (i.paidAt) return `Paid on ${day(i.paidAt)}`;
  if (i.voidedAt) return `Void since ${day(i.voidedAt)}: not to be paid`;
  return 'Issued, not paid yet';
}

/** What was bought, as the invoice's one line says it. */
export function lineText(i: InvoiceView): string {
  if (i.description) return i.description;
  const what = i.product ? `${i.product} bandwidth, ${bandwidthText(i.bytes)}` : 'ISP proxies';
  return i.source === 'auto-refill' ? `${what} (auto-refill)` : what;
}

export interface InvoiceDocument {
  invoice: InvoiceView;
  seller: Seller;
  customer: BillingDetails & { email: string };
}

export function renderInvoicePdf({ invoice: i, seller, customer }: InvoiceDocument): Promise<Buffer> {
  const issued = new Date(i.issuedAt);
  const doc = new PDFDocument({
    size: 'A4',
    margin: 56,
    info: {
      Title: `Invoice ${i.number}`,
      Author: winAnsi(seller.name),
      CreationDate: issued,
      ModDate: issued,
    },
  });
  const chunks: Buffer[] = [];
  doc.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
  });
  const t = (text: string, options?: PDFKit.Mixins.TextOptions) => doc.text(winAnsi(text), options);

  doc.font('Helvetica-Bold').fontSize(20);
  t(`Invoice ${i.number}`);
  doc.font('Helvetica').fontSize(10).moveDown(0.5);
  t(`Issued: ${day(i.issuedAt)}`);
  t(`Status: ${statusLine(i)}`);
  doc.moveDown();

  const top = doc.y;
  doc.font('Helvetica-Bold');
  t('From', { width: 220 });
  doc.font('Helvetica');
  for (const l of [seller.name, ...seller.addressLines]) t(l, { width: 220 });
  if (seller.taxId) t(`Tax ID: ${seller.taxId}`, { width: 220 });
  const fromBottom = doc.y;

  doc.y = top;
  const x = 300;
  doc.font('Helvetica-Bold').text('Bill to', x, top, { width: 240 });
  doc.font('Helvetica');
  for (const l of [customer.company || customer.email, ...lines(customer.address)]) t(l, { width: 240 });
  if (customer.vatId) t(`VAT ID: ${customer.vatId}`, { width: 240 });
  if (customer.company) t(customer.email, { width: 240 });
  doc.x = doc.page.margins.left;
  doc.y = Math.max(doc.y, fromBottom);
  doc.moveDown(2);

  const left = doc.page.margins.left;
  const right = doc.page.width - doc.page.margins.right;
  const row = (a: string, b: string, bold = false) => {
    const y = doc.y;
    doc.font(bold ? 'Helvetica-Bold' : 'Helvetica');
    doc.text(winAnsi(a), left, y, { width: 330 });
    const after = doc.y;
    doc.text(winAnsi(b), left + 340, y, { width: right - left - 340, align: 'right' });
    doc.y = Math.max(after, doc.y) + 4;
  };
  const amount = i.amountCents === null ? 'not priced' : moneyText(i.amountCents, i.currency);
  row('Description', 'Amount', true);
  doc.moveTo(left, doc.y).lineTo(right, doc.y).stroke();
  doc.moveDown(0.3);
  row(lineText(i), amount);
  doc.moveTo(left, doc.y).lineTo(right, doc.y).stroke();
  doc.moveDown(0.3);
  row('Total', amount, true);
  doc.moveDown(2);
  doc.font('Helvetica').fontSize(8);
  t(`Invoice id ${i.id}. Amounts in ${i.currency}.`, { width: right - left });
  doc.end();
  return done;
}

/**
 * The PDF of one of the account's invoices with the account's billing details, or null when the
 * account has no such invoice (another account's is not found either). With its number, for the
 * file name.
 */
export async function accountInvoicePdf(
  pool: Pool,
  seller: Seller,
  accountId: string,
  invoiceId: string,
): Promise<{ number: number; pdf: Buffer } | null> {
  const [invoice, details, account] = await Promise.all([
    readInvoice(pool, accountId, invoiceId),
    readBillingDetails(pool, accountId),
    pool.query<{ email: string }>('SELECT email FROM accounts WHERE id = $1', [accountId]),
  ]);
  if (!invoice || !account.rows[0]) return null;
  const pdf = await renderInvoicePdf({
    invoice,
    seller,
    customer: { ...details, email: account.rows[0].email },
  });
  return { number: invoice.number, pdf };
}

/** How the file is offered for download: "invoice-42.pdf". */
export const pdfHeaders = (number: number) => ({
  'Content-Disposition': `attachment; filename="invoice-${number}.pdf"`,
});
