// `npx proxyfleet admin accounts|keys|proxy-password|two-factor|audit-log ...` (docs/api.md "Admin API"):
// an account (create, list, show, suspend, invite, reactivate), its API keys, the resets of its
// proxy password and two-factor sign-in, and its audit log, through /admin/v1/accounts.
import { getWith, type Command } from './command.ts';

/** `<thing> reset <accountId>`: POST /accounts/<accountId>/<thing>/reset, no body. */
const reset = (thing: string, summary: string): Command => ({
  usage: `${thing} reset <accountId>`,
  summary,
  args: ['accountId'],
  request: (a) => ({ method: 'POST', path: `/accounts/${a.accountId}/${thing}/reset` }),
});

/** `accounts ...`: the account itself. */
export const ACCOUNT_COMMANDS: Record<string, Command> = {
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
};

/** `keys ...`: the account's API keys (the primary and the named ones). */
export const KEY_COMMANDS: Record<string, Command> = {
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
};

/** `audit-log`: who changed what on the account. */
export const AUDIT_LOG_COMMANDS: Record<string, Command> = {
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
};

/** `proxy-password reset`, `two-factor reset`: for a customer who lost one. */
export const RESET_COMMANDS: Record<string, Command> = {
  'proxy-password reset': reset('proxy-password', 'Issue a new proxy password'),
  'two-factor reset': reset('two-factor', 'Turn off two-factor sign-in for a customer locked out of it'),
};
