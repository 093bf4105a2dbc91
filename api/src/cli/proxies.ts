// `npx proxyfleet admin isp-proxies|allowlist ...` (docs/api.md "Admin API"): an account's static
// ISP proxies (assign, list, remove) and its IP allowlist (docs/adr/0036), through
// /admin/v1/accounts/:id/isp-proxies and /ip-allowlist.
import { num, type Command } from './command.ts';

/** `isp-proxies add|list|remove`, `allowlist add|list|remove`, in the order `--help` lists them. */
export const PROXY_COMMANDS: Record<string, Command> = {
  'isp-proxies add': {
    usage:
      'isp-proxies add <accountId> --host <host> --port <port> --username <u> --country <cc> [--password <p>] [--city <c>] [--isp <name>] [--expires-at <ISO time>]',
    summary: 'Assign a static ISP proxy',
    args: ['accountId'],
    options: {
      host: { type: 'string', required: true, help: 'Host name or IP' },
      port: { type: 'string', required: true, help: 'Port' },
      username: { type: 'string', required: true, help: 'Proxy username' },
      password: { type: 'string', help: 'Proxy password (generated when omitted)' },
      country: { type: 'string', required: true, help: 'Two-letter country code' },
      city: { type: 'string', help: 'City' },
      isp: { type: 'string', help: 'ISP name' },
      'expires-at': { type: 'string', help: 'Expiry, ISO 8601' },
    },
    request: (a, o) => ({
      method: 'POST',
      path: `/accounts/${a.accountId}/isp-proxies`,
      body: {
        host: o.host,
        port: num(o.port, 'port'),
        username: o.username,
        password: o.password,
        country: o.country,
        city: o.city,
        isp: o.isp,
        expiresAt: o['expires-at'],
      },
    }),
  },
  'allowlist add': {
    usage: 'allowlist add <accountId> <plan> --cidr <address|range> [--targeting <suffix>]',
    summary: 'Let an address or range (at most /24 or /48) use a plan without credentials (docs/adr/0036)',
    args: ['accountId', 'plan'],
    options: {
      // An option, not a positional: positionals are path segments and get URL-encoded.
      cidr: { type: 'string', required: true, help: 'An address (203.0.113.7) or a range (203.0.113.0/24)' },
      targeting: {
        type: 'string',
        help: "The plan's credential suffix, e.g. country-us_session-abc (default: rotating, any country)",
      },
    },
    request: (a, o) => ({
      method: 'POST',
      path: `/accounts/${a.accountId}/ip-allowlist`,
      body: { product: a.plan, cidr: o.cidr, targeting: o.targeting },
    }),
  },
  'allowlist list': {
    usage: 'allowlist list <accountId>',
    summary: "List an account's IP allowlist",
    args: ['accountId'],
    request: (a) => ({ method: 'GET', path: `/accounts/${a.accountId}/ip-allowlist` }),
  },
  'allowlist remove': {
    usage: 'allowlist remove <accountId> <entryId>',
    summary: 'Remove an IP allowlist entry; connections it admitted end',
    args: ['accountId', 'entryId'],
    request: (a) => ({ method: 'DELETE', path: `/accounts/${a.accountId}/ip-allowlist/${a.entryId}` }),
  },
  'isp-proxies list': {
    usage: 'isp-proxies list <accountId>',
    summary: "List an account's ISP proxies",
    args: ['accountId'],
    request: (a) => ({ method: 'GET', path: `/accounts/${a.accountId}/isp-proxies` }),
  },
  'isp-proxies remove': {
    usage: 'isp-proxies remove <accountId> <proxyId>',
    summary: 'Remove an ISP proxy',
    args: ['accountId', 'proxyId'],
    request: (a) => ({ method: 'DELETE', path: `/accounts/${a.accountId}/isp-proxies/${a.proxyId}` }),
  },
};
