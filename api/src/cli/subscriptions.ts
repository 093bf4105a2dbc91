// `npx proxyfleet admin subscriptions ...` (docs/billing.md): list, create, change, renewal on/off
// and cancel an account's subscriptions through /admin/v1/accounts/:id/subscriptions. Values are
// passed as given; the API validates them (400 with the reason, exit 1).
type Options = Record<string, string | boolean | string[] | undefined>;

const number = (value: unknown) =>
  typeof value === 'string' && value.trim() !== '' ? Number(value) : undefined;
const path = (a: Record<string, string>) => `/accounts/${a.accountId}/subscriptions`;

export const SUBSCRIPTION_COMMANDS = {
  'subscriptions list': {
    usage: 'subscriptions list <accountId>',
    summary: "An account's subscriptions: what renews, when, and for how much",
    args: ['accountId'],
    request: (a: Record<string, string>) => ({ method: 'GET', path: path(a) }),
  },
  'subscriptions create-plan': {
    usage:
      'subscriptions create-plan <accountId> --product <plan> --gb <GB per month> [--start <ISO time>] [--no-renew]',
    summary: 'Start a bandwidth plan: its GB every month, renewed on the start day’s anniversary',
    args: ['accountId'],
    options: {
      product: {
        type: 'string' as const,
        required: true,
        help: 'The plan (light, basic, advanced, mobile, datacenter)',
      },
      gb: { type: 'string' as const, required: true, help: 'GB added every period, 1-100000' },
      start: { type: 'string' as const, help: 'Start (ISO 8601, UTC); default now' },
      'no-renew': { type: 'boolean' as const, help: 'Do not renew: it ends after the first month' },
    },
    request: (a: Record<string, string>, o: Options) => ({
      method: 'POST',
      path: path(a),
      body: {
        kind: 'bandwidth_plan',
        product: o.product,
        gbPerPeriod: number(o.gb),
        startAt: o.start,
        autoRenew: o['no-renew'] ? false : undefined,
      },
    }),
  },
  'subscriptions create-isp': {
    usage:
      'subscriptions create-isp <accountId> --country <cc> [--count <n>] [--proxy <ispProxyId>]... [--start <ISO time>] [--no-renew]',
    summary: 'Start an ISP proxy rental: proxies of a country, priced per proxy and month',
    args: ['accountId'],
    options: {
      country: { type: 'string' as const, required: true, help: 'Two-letter country code, lower case' },
      count: { type: 'string' as const, help: 'Proxies rented (default 1, or the number of --proxy)' },
      proxy: {
        type: 'string' as const,
        multiple: true,
        help: 'An ISP proxy of the account this rental pays for',
      },
      start: { type: 'string' as const, help: 'Start (ISO 8601, UTC); default now' },
      'no-renew': { type: 'boolean' as const, help: 'Do not renew: it ends after the first month' },
    },
    request: (a: Record<string, string>, o: Options) => ({
      method: 'POST',
      path: path(a),
      body: {
        kind: 'isp_proxy',
        country: o.country,
        proxyCount: number(o.count),
        ispProxyIds: Array.isArray(o.proxy) ? o.proxy : undefined,
        startAt: o.start,
        autoRenew: o['no-renew'] ? false : undefined,
      },
    }),
  },
  'subscriptions change': {
    usage: 'subscriptions change <accountId> <subscriptionId> [--count <n>] [--gb <GB>] [--renew on|off]',
    summary: 'Change what the next renewals buy, or turn renewal on or off',
    args: ['accountId', 'subscriptionId'],
    options: {
      count: { type: 'string' as const, help: 'ISP rental: proxies rented' },
      gb: { type: 'string' as const, help: 'Plan: GB per period' },
      renew: { type: 'string' as const, help: 'on or off' },
    },
    request: (a: Record<string, string>, o: Options) => ({
      method: 'PATCH',
      path: `${path(a)}/${a.subscriptionId}`,
      body: {
        proxyCount: number(o.count),
        gbPerPeriod: number(o.gb),
        autoRenew:
          o.renew === undefined
            ? undefined
            : o.renew === 'on' || o.renew === 'true'
              ? true
              : o.renew === 'off' || o.renew === 'false'
                ? false
                : o.renew,
      },
    }),
  },
  'subscriptions cancel': {
    usage: 'subscriptions cancel <accountId> <subscriptionId>',
    summary: 'Cancel at once: no more renewals; what was paid stays paid until paidUntil',
    args: ['accountId', 'subscriptionId'],
    request: (a: Record<string, string>) => ({
      method: 'POST',
      path: `${path(a)}/${a.subscriptionId}/cancel`,
    }),
  },
};
