// `npx proxyfleet admin sub-users ...` (docs/api.md "Sub-users"): list, create, change, suspend,
// resume and delete an account's sub-users through /admin/v1/accounts/:id/sub-users.
import { numOrNone, UsageError, type Command, type OptionValue } from './command.ts';
/** Repeated `--limit <plan>=<GB|none>` as the API's trafficLimits; undefined when none given. */
const trafficLimits = (value: OptionValue): Record<string, number | null> | undefined => {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  const limits: Record<string, number | null> = {};
  for (const item of value) {
    const [plan, amount] = item.split('=');
    if (!plan || amount === undefined) throw new UsageError('--limit must be <plan>=<GB|none>');
    limits[plan] = numOrNone(amount, 'limit') ?? null;
  }
  return limits;
};
const SUB_USER_OPTIONS = {
  username: { type: 'string', help: 'Proxy username, 4-32 of [a-z0-9] (default: generated)' },
  password: { type: 'string', help: 'Proxy password, 8-128 letters and digits (default: generated)' },
  status: { type: 'string', help: 'active or suspended' },
  'max-connections': { type: 'string', help: "Concurrent connections, 1-100000; none: the plan's cap" },
  'bytes-per-second': {
    type: 'string',
    help: 'Bandwidth cap, 65536-10000000000 bytes per second, fleet-wide; none: no cap of its own',
  },
  limit: {
    type: 'string',
    multiple: true,
    help: "Traffic limit <plan>=<GB|none> over the sub-user's lifetime; repeat for several plans",
  },
} as const;
const subUserFields = (o: Record<string, OptionValue>) => ({
  username: o.username,
  password: o.password,
  status: o.status,
  maxConnections: numOrNone(o['max-connections'], 'max-connections'),
  bytesPerSecond: numOrNone(o['bytes-per-second'], 'bytes-per-second'),
  trafficLimits: trafficLimits(o.limit),
});

export const SUB_USER_COMMANDS: Record<string, Command> = {
  'sub-users list': {
    usage: 'sub-users list <accountId>',
    summary: "List an account's sub-users: credentials, limits, use per plan",
    args: ['accountId'],
    request: (a) => ({ method: 'GET', path: `/accounts/${a.accountId}/sub-users` }),
  },
  'sub-users create': {
    usage:
      'sub-users create <accountId> --name <name> [--username <u>] [--password <p>] [--status <s>] ' +
      '[--max-connections <n|none>] [--bytes-per-second <n|none>] [--limit <plan>=<GB|none>]...',
    summary: 'Create a sub-user: own proxy credentials, optional limits per plan and caps',
    args: ['accountId'],
    options: {
      name: { type: 'string', required: true, help: 'A label, unique in the account' },
      ...SUB_USER_OPTIONS,
    },
    request: (a, o) => ({
      method: 'POST',
      path: `/accounts/${a.accountId}/sub-users`,
      body: { name: o.name, ...subUserFields(o) },
    }),
  },
  'sub-users update': {
    usage:
      'sub-users update <accountId> <subUserId> [--name <name>] [--username <u>] [--password <p>] ' +
      '[--reset-password] [--status <s>] [--max-connections <n|none>] [--bytes-per-second <n|none>] ' +
      '[--limit <plan>=<GB|none>]...',
    summary: 'Change a sub-user; limits merge per plan (none removes one)',
    args: ['accountId', 'subUserId'],
    options: {
      name: { type: 'string', help: 'A label, unique in the account' },
      ...SUB_USER_OPTIONS,
      'reset-password': { type: 'boolean', help: 'Issue a new generated password' },
    },
    request: (a, o) => ({
      method: 'PATCH',
      path: `/accounts/${a.accountId}/sub-users/${a.subUserId}`,
      body: { name: o.name, ...subUserFields(o), resetPassword: o['reset-password'] ? true : undefined },
    }),
  },
  'sub-users suspend': {
    usage: 'sub-users suspend <accountId> <subUserId>',
    summary: 'Suspend a sub-user: the gateways refuse its credentials and end its connections',
    args: ['accountId', 'subUserId'],
    request: (a) => ({
      method: 'PATCH',
      path: `/accounts/${a.accountId}/sub-users/${a.subUserId}`,
      body: { status: 'suspended' },
    }),
  },
  'sub-users resume': {
    usage: 'sub-users resume <accountId> <subUserId>',
    summary: 'Resume a suspended sub-user',
    args: ['accountId', 'subUserId'],
    request: (a) => ({
      method: 'PATCH',
      path: `/accounts/${a.accountId}/sub-users/${a.subUserId}`,
      body: { status: 'active' },
    }),
  },
  'sub-users delete': {
    usage: 'sub-users delete <accountId> <subUserId>',
    summary: 'Delete a sub-user; its connections end',
    args: ['accountId', 'subUserId'],
    request: (a) => ({ method: 'DELETE', path: `/accounts/${a.accountId}/sub-users/${a.subUserId}` }),
  },
};
