// `npx proxyfleet admin ...`: the admin HTTP API (/admin/v1) from a shell. Prints the JSON answer;
// exits 1 with the API's error message when the call fails, 2 on a usage error.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { apiUrl, loadCliConfig } from './config.ts';
import { num, UsageError, type Command, type OptionValue } from './command.ts';
import { SUBSCRIPTION_COMMANDS } from './subscriptions.ts';
import { INVOICE_COMMANDS } from './invoices.ts';
import { numOrNone, SUB_USER_COMMANDS } from './sub-users.ts';

const onOff = (value: OptionValue, name: string): boolean | undefined => {
  if (value === undefined) return undefined;
  if (value === 'on' || value === 'true') return true;
  if (value === 'off' || value === 'false') return false;
  throw new UsageError(`--${name} must be on or off`);
};
/** A GET of `path` with the string options named in `keys` as its query. */
const getWith = (path: string, o: Record<string, OptionValue>, keys: string[]) => {
  const q = new URLSearchParams();
  for (const k of keys) if (typeof o[k] === 'string') q.set(k, o[k]);
  return { method: 'GET', path: q.size ? `${path}?${q.toString()}` : path };
};
const capArgument = (value: string | undefined): number => {
  const n = Number(value);
  if (!value || !Number.isFinite(n)) throw new UsageError('bytesPerSecond must be a number or none');
  return n;
};

/** `<thing> reset <accountId>`: POST /accounts/<accountId>/<thing>/reset, no body. */
const reset = (thing: string, summary: string): Command => ({
  usage: `${thing} reset <accountId>`,
  summary,
  args: ['accountId'],
  request: (a) => ({ method: 'POST', path: `/accounts/${a.accountId}/${thing}/reset` }),
});

export const COMMANDS: Record<string, Command> = {
  'accounts create': {
    usage: 'accounts create --email <email>',
    summary: 'Create an account; prints its primary API key and proxy credentials (shown once)',
    args: [],
    options: { email: { type: 'string', required: true, help: 'Owner email' } },
    request: (_a, o) => ({ method: 'POST', path: '/accounts', body: { email: o.email } }),
  },
  'accounts list': {
    usage: 'accounts list [--email <email>] [--limit <n>] [--offset <n>]',
    summary: 'List accounts',
    args: [],
    options: {
      email: { type: 'string', help: 'Only this email' },
      limit: { type: 'string', help: 'Page size (default 100)' },
      offset: { type: 'string', help: 'Skip this many' },
    },
    request: (_a, o) => getWith('/accounts', o, ['email', 'limit', 'offset']),
  },
  'accounts get': {
    usage: 'accounts get <accountId>',
    summary: 'Show an account',
    args: ['accountId'],
    request: (a) => ({ method: 'GET', path: `/accounts/${a.accountId}` }),
  },
  'accounts suspend': {
    usage: 'accounts suspend <accountId>',
    summary: 'Suspend: every key of the account is refused',
    args: ['accountId'],
    request: (a) => ({ method: 'POST', path: `/accounts/${a.accountId}/suspend` }),
  },
  'accounts invite': {
    usage: 'accounts invite <accountId>',
    summary: 'Email a one-time link to set the dashboard password (prints it too)',
    args: ['accountId'],
    request: (a) => ({ method: 'POST', path: `/accounts/${a.accountId}/dashboard-invite` }),
  },
  'accounts reactivate': {
    usage: 'accounts reactivate <accountId>',
    summary: 'Reactivate a suspended account',
    args: ['accountId'],
    request: (a) => ({ method: 'POST', path: `/accounts/${a.accountId}/reactivate` }),
  },
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
  'keys list': {
    usage: 'keys list <accountId>',
    summary: "List an account's keys (never the keys themselves)",
    args: ['accountId'],
    request: (a) => ({ method: 'GET', path: `/accounts/${a.accountId}/keys` }),
  },
  'keys regenerate-primary': {
    usage: 'keys regenerate-primary <accountId>',
    summary: 'Replace the primary key; the old one stops working at once',
    args: ['accountId'],
    request: (a) => ({ method: 'POST', path: `/accounts/${a.accountId}/keys/primary/regenerate` }),
  },
  'keys create': {
    usage: 'keys create <accountId> --name <name>',
    summary: 'Create a named key (at most 10 active)',
    args: ['accountId'],
    options: { name: { type: 'string', required: true, help: 'Key name, for example the integration' } },
    request: (a, o) => ({ method: 'POST', path: `/accounts/${a.accountId}/keys`, body: { name: o.name } }),
  },
  'keys revoke': {
    usage: 'keys revoke <accountId> <keyId>',
    summary: 'Revoke a named key; it stops working at once',
    args: ['accountId', 'keyId'],
    request: (a) => ({ method: 'DELETE', path: `/accounts/${a.accountId}/keys/${a.keyId}` }),
  },
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
  ...INVOICE_COMMANDS,
  'audit-log': {
    usage: 'audit-log <accountId> [--limit <n>] [--cursor <nextCursor>]',
    summary: 'Who changed what on an account, newest first (docs/security.md, "Audit log")',
    args: ['accountId'],
    options: {
      limit: { type: 'string', help: 'Page size, 1-200 (default 50)' },
      cursor: { type: 'string', help: 'Older entries: nextCursor of the previous page' },
    },
    request: (a, o) => getWith(`/accounts/${a.accountId}/audit-log`, o, ['limit', 'cursor']),
  },
  'usage targets': {
    usage: 'usage targets <accountId> [--date <YYYY-MM-DD>] [--product <plan>]',
    summary: "An account's bytes and requests per target domain on one UTC day (default today)",
    args: ['accountId'],
    options: {
      date: { type: 'string', help: 'UTC day of the last 30, YYYY-MM-DD (default today)' },
      product: { type: 'string', help: 'Only this product' },
    },
    request: (a, o) => getWith(`/accounts/${a.accountId}/usage/targets`, o, ['date', 'product']),
  },
  'target-stats set': {
    usage: 'target-stats set <accountId> --enabled on|off',
    summary: 'Record target statistics for an account or not (off deletes what is stored)',
    args: ['accountId'],
    options: { enabled: { type: 'string', required: true, help: 'on or off' } },
    request: (a, o) => ({
      method: 'PUT',
      path: `/accounts/${a.accountId}/target-stats`,
      body: { enabled: onOff(o.enabled, 'enabled') },
    }),
  },
  'throttle set': {
    usage: 'throttle set <accountId> <plan> <bytesPerSecond|none>',
    summary: "Bandwidth cap of one plan in bytes per second, fleet-wide (none: the plan's default)",
    args: ['accountId', 'plan', 'bytesPerSecond'],
    request: (a) => ({
      method: 'PUT',
      path: `/accounts/${a.accountId}/throttle/${a.plan}`,
      body: { bytesPerSecond: a.bytesPerSecond === 'none' ? null : capArgument(a.bytesPerSecond) },
    }),
  },
  'proxy-password reset': reset('proxy-password', 'Issue a new proxy password'),
  'two-factor reset': reset('two-factor', 'Turn off two-factor sign-in for a customer locked out of it'),
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
  ...SUB_USER_COMMANDS,
  ...SUBSCRIPTION_COMMANDS,
};

const GLOBAL_HELP = `Global options:
  --url <url>      Admin API base URL (env PROXYFLEET_API_URL; else http://PROXYFLEET_API_HOST:PROXYFLEET_API_PORT,
                   as npm start listens: default http://127.0.0.1:8080)
  --token <token>  Admin token (env PROXYFLEET_ADMIN_TOKEN, else <PROXYFLEET_DATA_DIR>/admin-token of npm start)
  -h, --help       Show help`;

function helpText(): string {
  const lines = ['Usage: proxyfleet admin <command> [options]', '', 'Commands:'];
  for (const c of Object.values(COMMANDS)) lines.push(`  ${c.usage}`, `      ${c.summary}`);
  lines.push(
    '',
    'Help on a group or a command: proxyfleet admin accounts --help, proxyfleet admin accounts create --help',
  );
  return `${lines.join('\n')}\n\n${GLOBAL_HELP}\n`;
}

/** The command groups: the first word of each command (accounts, keys, purchases, ...). */
const GROUPS = new Set(Object.keys(COMMANDS).map((name) => name.split(' ')[0]!));
const HELP = new Set(['--help', '-h', 'help']);

function groupHelp(group: string): string {
  const lines = [`Usage: proxyfleet admin ${group} <command> [options]`, '', 'Commands:'];
  for (const [name, c] of Object.entries(COMMANDS)) {
    if (name.split(' ')[0] === group) lines.push(`  ${c.usage}`, `      ${c.summary}`);
  }
  return `${lines.join('\n')}\n\n${GLOBAL_HELP}\n`;
}

function commandHelp(c: Command): string {
  const lines = [`Usage: proxyfleet admin ${c.usage}`, '', c.summary];
  for (const [name, o] of Object.entries(c.options ?? {}))
    lines.push(`  --${name}${o.required ? ' (required)' : ''}: ${o.help}`);
  return `${lines.join('\n')}\n\n${GLOBAL_HELP}\n`;
}

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  fetch: typeof fetch;
  env?: Record<string, string | undefined>;
}

/** Runs the CLI; returns the exit code. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [area, ...rest] = argv;
  // Loaded on demand: it reads the dev mail sink with mailparser, a devDependency that the
  // image (npm ci --omit=dev) does not have, so the admin CLI must start without it.
  if (area === 'mail') return (await import('./mail.ts')).runMailCli(rest, io);
  // Help at every level: `proxyfleet --help`, `admin --help`, `admin accounts --help` (or
  // `admin accounts`, `admin help accounts`), `admin accounts create --help`.
  if (
    area === undefined ||
    HELP.has(area) ||
    (area === 'admin' && (rest.length === 0 || (HELP.has(rest[0]!) && !GROUPS.has(rest[1] ?? ''))))
  ) {
    io.out(helpText());
    return 0;
  }
  if (area !== 'admin') {
    io.err(`unknown area: ${area}\n\n${helpText()}`);
    return 2;
  }
  // A command of one word (audit-log) takes its arguments from the second word on.
  const single = COMMANDS[rest[0]!] ? rest[0]! : undefined;
  const group = HELP.has(rest[0]!) ? rest[1]! : rest[0]!;
  if (!single && GROUPS.has(group) && (HELP.has(rest[0]!) || rest[1] === undefined || HELP.has(rest[1]))) {
    io.out(groupHelp(group));
    return 0;
  }
  const name = single ?? `${rest[0]} ${rest[1] ?? ''}`.trim();
  const command = COMMANDS[name];
  if (!command) {
    io.err(`unknown command: ${name}\n\n${helpText()}`);
    return 2;
  }
  try {
    const { values, positionals } = parseArgs({
      args: rest.slice(single ? 1 : 2),
      allowPositionals: true,
      strict: true,
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(
          Object.entries(command.options ?? {}).map(([k, o]) => [
            k,
            { type: o.type, ...(o.multiple ? { multiple: true } : {}) },
          ]),
        ),
      },
    });
    if (values.help) {
      io.out(commandHelp(command));
      return 0;
    }
    if (positionals.length !== command.args.length)
      throw new UsageError(`expected ${command.args.join(' ') || 'no arguments'}`);
    const given = values as Record<string, OptionValue>;
    for (const [k, o] of Object.entries(command.options ?? {}))
      if (o.required && given[k] === undefined) throw new UsageError(`--${k} is required`);
    const args = Object.fromEntries(command.args.map((k, i) => [k, encodeURIComponent(positionals[i]!)]));
    const request = command.request(args, given);
    const config = loadCliConfig(io.env);
    const token =
      values.token ??
      config.PROXYFLEET_ADMIN_TOKEN ??
      (await readFile(path.join(config.PROXYFLEET_DATA_DIR, 'admin-token'), 'utf8').then(
        (t) => t.trim(),
        () => undefined,
      ));
    if (!token) throw new UsageError('no admin token: pass --token or set PROXYFLEET_ADMIN_TOKEN');
    const base = (values.url ?? apiUrl(config)).replace(/\/+$/, '');
    let res: Response;
    try {
      res = await io.fetch(`${base}/admin/v1${request.path}`, {
        method: request.method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(request.body ? { 'content-type': 'application/json' } : {}),
        },
        ...(request.body ? { body: JSON.stringify(request.body) } : {}),
      });
    } catch (err) {
      // fetch says only "fetch failed"; the reason (ECONNREFUSED, ENOTFOUND, ...) is its cause.
      const cause = err instanceof Error && err.cause instanceof Error ? err.cause : undefined;
      const reason =
        (cause && 'code' in cause ? String(cause.code) : undefined) ?? cause?.message ?? String(err);
      io.err(
        `error: cannot reach the admin API at ${base} (${reason}).\n` +
          'Is `npm start` (or the API) running? Point the CLI at it with --url or PROXYFLEET_API_URL, ' +
          'or PROXYFLEET_API_HOST and PROXYFLEET_API_PORT as npm start reads them.\n',
      );
      return 1;
    }
    const text = await res.text();
    if (!res.ok) {
      let message = text;
      try {
        message = (JSON.parse(text) as { error?: string }).error ?? text;
      } catch {
        // not JSON
      }
      io.err(`error ${res.status}: ${message}\n`);
      return 1;
    }
    // A CSV export is printed as it came; JSON is pretty-printed.
    if (!text) io.out('done\n');
    else if (res.headers.get('content-type')?.startsWith('application/json'))
      io.out(`${JSON.stringify(JSON.parse(text), null, 2)}\n`);
    else io.out(text);
    return 0;
  } catch (err) {
    const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
    if (err instanceof UsageError || code.startsWith('ERR_PARSE_ARGS')) {
      io.err(`${(err as Error).message}\n\n${commandHelp(command)}`);
      return 2;
    }
    io.err(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
