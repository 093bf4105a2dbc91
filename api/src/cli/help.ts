// The admin CLI's help (main.ts prints it): every command, one group's, or one command's with its
// options, each followed by the global options.
import type { Command } from './command.ts';

const GLOBAL_HELP = `Global options:
  --url <url>      Admin API base URL (env PROXYFLEET_API_URL; else http://PROXYFLEET_API_HOST:PROXYFLEET_API_PORT,
                   as npm start listens: default http://127.0.0.1:8080)
  --token <token>  Admin token (env PROXYFLEET_ADMIN_TOKEN, else <PROXYFLEET_DATA_DIR>/admin-token of npm start)
  -h, --help       Show help`;

/** The group of a command: its first word (accounts, keys, purchases, ...). */
export const groupOf = (name: string): string => name.split(' ')[0]!;

export function helpText(commands: Record<string, Command>): string {
  const lines = ['Usage: proxyfleet admin <command> [options]', '', 'Commands:'];
  for (const c of Object.values(commands)) lines.push(`  ${c.usage}`, `      ${c.summary}`);
  lines.push(
    '',
    'Help on a group or a command: proxyfleet admin accounts --help, proxyfleet admin accounts create --help',
  );
  return `${lines.join('\n')}\n\n${GLOBAL_HELP}\n`;
}

export function groupHelp(commands: Record<string, Command>, group: string): string {
  const lines = [`Usage: proxyfleet admin ${group} <command> [options]`, '', 'Commands:'];
  for (const [name, c] of Object.entries(commands)) {
    if (groupOf(name) === group) lines.push(`  ${c.usage}`, `      ${c.summary}`);
  }
  return `${lines.join('\n')}\n\n${GLOBAL_HELP}\n`;
}

export function commandHelp(c: Command): string {
  const lines = [`Usage: proxyfleet admin ${c.usage}`, '', c.summary];
  for (const [name, o] of Object.entries(c.options ?? {}))
    lines.push(`  --${name}${o.required ? ' (required)' : ''}: ${o.help}`);
  return `${lines.join('\n')}\n\n${GLOBAL_HELP}\n`;
}
