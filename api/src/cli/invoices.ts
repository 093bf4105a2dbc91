// `npx proxyfleet admin invoices ...` (docs/api.md "Admin API"): one account's invoices
// (/admin/v1/accounts/:id/invoices), every account's by status, their CSV export, and marking one
// paid or void through /admin/v1/invoices.
import { getWith, type Command, type OptionValue } from './command.ts';

const FILTERS = ['status', 'account', 'limit', 'before'] as const;

/** The list's filters as its query string (--account is the API's accountId). */
function query(o: Record<string, OptionValue>): string {
  const q = new URLSearchParams();
  for (const k of FILTERS) {
    const v = o[k];
    if (typeof v === 'string') q.set(k === 'account' ? 'accountId' : k, v);
  }
  return q.size ? `?${q.toString()}` : '';
}

const filterOptions = {
  status: { type: 'string', help: 'issued, paid or void' },
  account: { type: 'string', help: "Only this account's invoices (its id)" },
  limit: { type: 'string', help: 'Rows, 1-100 (export: 1-100000, default all)' },
  before: { type: 'string', help: 'Only invoices numbered below this (nextBefore of the previous page)' },
} as const;

const settle = (to: 'paid' | 'void', summary: string): Command => ({
  usage: `invoices ${to === 'paid' ? 'pay' : 'void'} <invoiceId>`,
  summary,
  args: ['invoiceId'],
  request: (a) => ({ method: 'POST', path: `/invoices/${encodeURIComponent(a.invoiceId!)}/${to}` }),
});

export const INVOICE_COMMANDS: Record<string, Command> = {
  'invoices list': {
    usage: 'invoices list <accountId> [--limit <n>] [--before <number>]',
    summary: "An account's invoices, newest first",
    args: ['accountId'],
    options: {
      limit: { type: 'string', help: 'Page size, 1-100 (default 20)' },
      before: { type: 'string', help: 'Only invoices numbered below this (nextBefore of the previous page)' },
    },
    request: (a, o) => getWith(`/accounts/${a.accountId}/invoices`, o, ['limit', 'before']),
  },
  'invoices all': {
    usage:
      'invoices all [--status issued|paid|void] [--account <accountId>] [--limit <n>] [--before <number>]',
    summary: "Every account's invoices, newest first",
    args: [],
    options: filterOptions,
    request: (_a, o) => ({ method: 'GET', path: `/invoices${query(o)}` }),
  },
  'invoices export': {
    usage:
      'invoices export [--status issued|paid|void] [--account <accountId>] [--limit <n>] [--before <number>]',
    summary: 'The same invoices as CSV for accounting, printed to stdout',
    args: [],
    options: filterOptions,
    request: (_a, o) => ({ method: 'GET', path: `/invoices.csv${query(o)}` }),
  },
  'invoices pay': settle('paid', 'Mark a bill-later invoice paid (frees its amount in the credit limit)'),
  'invoices void': settle('void', 'Void an invoice: not to be paid; takes back its unused bandwidth'),
};
