// `npx proxyfleet admin ...`: the admin HTTP API (/admin/v1) from a shell. Prints the JSON answer;
// exits 1 with the API's error message when the call fails, 2 on a usage error. This file only
// dispatches: the commands are in one file per group (accounts.ts, billing.ts, invoices.ts,
// usage.ts, proxies.ts, sub-users.ts, subscriptions.ts), the help in help.ts, the call in call.ts.
import { parseArgs } from 'node:util';
import { UsageError, type Command, type OptionValue } from './command.ts';
import { ACCOUNT_COMMANDS, AUDIT_LOG_COMMANDS, KEY_COMMANDS, RESET_COMMANDS } from './accounts.ts';
import { BILLING_SETTING_COMMANDS, PURCHASE_COMMANDS } from './billing.ts';
import { INVOICE_COMMANDS } from './invoices.ts';
import { USAGE_COMMANDS } from './usage.ts';
import { PROXY_COMMANDS } from './proxies.ts';
import { SUB_USER_COMMANDS } from './sub-users.ts';
import { SUBSCRIPTION_COMMANDS } from './subscriptions.ts';
import { commandHelp, groupHelp, groupOf, helpText } from './help.ts';
import { callAdminApi, type CliIo } from './call.ts';

/** Every command, in the order `--help` lists them. */
export const COMMANDS: Record<string, Command> = {
  ...ACCOUNT_COMMANDS,
  ...PURCHASE_COMMANDS,
  ...KEY_COMMANDS,
  ...BILLING_SETTING_COMMANDS,
  ...INVOICE_COMMANDS,
  ...AUDIT_LOG_COMMANDS,
  ...USAGE_COMMANDS,
  ...RESET_COMMANDS,
  ...PROXY_COMMANDS,
  ...SUB_USER_COMMANDS,
  ...SUBSCRIPTION_COMMANDS,
};

/** The command groups: the first word of each command (accounts, keys, purchases, ...). */
const GROUPS = new Set(Object.keys(COMMANDS).map(groupOf));
const HELP = new Set(['--help', '-h', 'help']);

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
    io.out(helpText(COMMANDS));
    return 0;
  }
  if (area !== 'admin') {
    io.err(`unknown area: ${area}\n\n${helpText(COMMANDS)}`);
    return 2;
  }
  // A command of one word (audit-log) takes its arguments from the second word on.
  const single = COMMANDS[rest[0]!] ? rest[0]! : undefined;
  const group = HELP.has(rest[0]!) ? rest[1]! : rest[0]!;
  if (!single && GROUPS.has(group) && (HELP.has(rest[0]!) || rest[1] === undefined || HELP.has(rest[1]))) {
    io.out(groupHelp(COMMANDS, group));
    return 0;
  }
  const name = single ?? `${rest[0]} ${rest[1] ?? ''}`.trim();
  const command = COMMANDS[name];
  if (!command) {
    io.err(`unknown command: ${name}\n\n${helpText(COMMANDS)}`);
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
    return await callAdminApi(request, { url: values.url, token: values.token }, io);
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
