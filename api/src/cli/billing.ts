// `npx proxyfleet admin purchases|alerts|auto-refill|credit-limit ...` (docs/api.md "Admin API"): buy
// bandwidth for an account, and its billing settings: the email alerts, auto-refill per plan and
// the credit limit for bill-later payment, through /admin/v1/accounts/:id.
import { num, numOrNone, onOff, type Command } from './command.ts';

/** `purchases create`: bandwidth bought, its invoice printed. */
export const PURCHASE_COMMANDS: Record<string, Command> = {
  'purchases create': {
    usage: 'purchases create <accountId> --product <plan> --gb <amount> [--idempotency-key <key>]',
    summary: 'Buy bandwidth (fractional GB allowed); prints the invoice',
    args: ['accountId'],
    options: {
      product: { type: 'string', required: true, help: 'light, basic, advanced, mobile or datacenter' },
      gb: { type: 'string', required: true, help: 'GB (10^9 bytes), for example 0.5' },
      'idempotency-key': { type: 'string', help: 'A retry with the same key buys nothing more' },
    },
    request: (a, o) => ({
      method: 'POST',
      path: `/accounts/${a.accountId}/purchases`,
      body: {
        product: o.product,
        gb: num(o.gb, 'gb'),
        ...(o['idempotency-key'] ? { idempotencyKey: o['idempotency-key'] } : {}),
      },
    }),
  },
};

/** `alerts set`, `auto-refill set`, `credit-limit show|set`. */
export const BILLING_SETTING_COMMANDS: Record<string, Command> = {
  'alerts set': {
    usage:
      'alerts set <accountId> [--low-bandwidth on|off] [--new-invoice on|off] [--server-alerts on|off] [--low-bandwidth-percent <1-99>] [--low-bandwidth-floor-gb <gb|none>]',
    summary: 'Switch email alerts on or off',
    args: ['accountId'],
    options: {
      'low-bandwidth': { type: 'string', help: 'on or off' },
      'new-invoice': { type: 'string', help: 'on or off' },
      'server-alerts': { type: 'string', help: 'on or off' },
      'low-bandwidth-percent': { type: 'string', help: 'Remaining % that triggers the low-bandwidth email' },
      'low-bandwidth-floor-gb': {
        type: 'string',
        help: 'Also when this many GB remain; none: the percent alone',
      },
    },
    request: (a, o) => ({
      method: 'PUT',
      path: `/accounts/${a.accountId}/alerts`,
      body: {
        lowBandwidth: onOff(o['low-bandwidth'], 'low-bandwidth'),
        newInvoice: onOff(o['new-invoice'], 'new-invoice'),
        serverAlerts: onOff(o['server-alerts'], 'server-alerts'),
        lowBandwidthPercent: num(o['low-bandwidth-percent'], 'low-bandwidth-percent'),
        lowBandwidthFloorGb: numOrNone(o['low-bandwidth-floor-gb'], 'low-bandwidth-floor-gb'),
      },
    }),
  },
  'auto-refill set': {
    usage:
      'auto-refill set <accountId> <plan> --enabled on|off --threshold-gb <gb> --refill-gb <gb> [--max-per-month <n>]',
    summary: 'Auto-refill settings of one plan',
    args: ['accountId', 'plan'],
    options: {
      enabled: { type: 'string', required: true, help: 'on or off' },
      'threshold-gb': { type: 'string', required: true, help: 'Refill when remaining GB drops below this' },
      'refill-gb': { type: 'string', required: true, help: 'GB bought per refill' },
      'max-per-month': { type: 'string', help: 'Refills per month at most (default 5)' },
    },
    request: (a, o) => ({
      method: 'PUT',
      path: `/accounts/${a.accountId}/auto-refill/${a.plan}`,
      body: {
        enabled: onOff(o.enabled, 'enabled'),
        thresholdGb: num(o['threshold-gb'], 'threshold-gb'),
        refillGb: num(o['refill-gb'], 'refill-gb'),
        maxRefillsPerMonth: num(o['max-per-month'], 'max-per-month'),
      },
    }),
  },
  'credit-limit show': {
    usage: 'credit-limit show <accountId>',
    summary: 'The credit limit for bill-later payment and what this month used of it',
    args: ['accountId'],
    request: (a) => ({ method: 'GET', path: `/accounts/${a.accountId}/credit-limit` }),
  },
  'credit-limit set': {
    usage: 'credit-limit set <accountId> <amount|default>',
    summary: 'Credit limit per calendar month, in the price currency (default: PROXYFLEET_CREDIT_LIMIT)',
    args: ['accountId', 'amount'],
    request: (a) => ({
      method: 'PUT',
      path: `/accounts/${a.accountId}/credit-limit`,
      body: { limit: a.amount === 'default' ? null : num(a.amount, 'amount') },
    }),
  },
};
