// `npx proxyfleet admin usage|target-stats|throttle ...` (docs/api.md "Admin API"): an account's
// traffic: bytes and requests per target domain, whether target statistics are kept, and the
// bandwidth cap per plan, through /admin/v1/accounts/:id.
import { getWith, onOff, UsageError, type Command } from './command.ts';

const capArgument = (value: string | undefined): number => {
  const n = Number(value);
  if (!value || !Number.isFinite(n)) throw new UsageError('bytesPerSecond must be a number or none');
  return n;
};

/** `usage targets`, `target-stats set`, `throttle set`. */
export const USAGE_COMMANDS: Record<string, Command> = {
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
};
