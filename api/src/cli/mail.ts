// `npx proxyfleet mail list` / `mail show <n>`: the emails the dev mail sink of `npm start` kept
// under <PROXYFLEET_DATA_DIR>/mail (dev/mail-sink.ts). Reads files; no API call.
import path from 'node:path';
import { listMail, showMail } from './mail-store.ts';
import { loadCliConfig } from './config.ts';

export const MAIL_HELP = `Usage: proxyfleet mail <command>

Commands:
  mail list
      The emails npm start's mail sink kept (<PROXYFLEET_DATA_DIR>/mail), oldest first, numbered
  mail show <n>
      One of them: headers and text
`;

export async function runMailCli(
  args: string[],
  io: { out(text: string): void; err(text: string): void; env?: Record<string, string | undefined> },
): Promise<number> {
  const dir = path.join(loadCliConfig(io.env).PROXYFLEET_DATA_DIR, 'mail');
  if (args[0] === 'list' && args.length === 1) {
    const mails = await listMail(dir);
    if (mails.length === 0) io.out(`no emails in ${dir}\n`);
    for (const m of mails) io.out(`${String(m.n).padStart(4)}  ${m.date}  ${m.to}  ${m.subject}\n`);
    return 0;
  }
  if (args[0] === 'show' && args.length === 2 && /^[1-9]\d*$/.test(args[1]!)) {
    const text = await showMail(dir, Number(args[1]));
    if (text === undefined) {
      io.err(`no email number ${args[1]} in ${dir} (see: proxyfleet mail list)\n`);
      return 1;
    }
    io.out(text.endsWith('\n') ? text : `${text}\n`);
    return 0;
  }
  const help = args.length === 0 || args[0] === '--help' || args[0] === '-h';
  io[help ? 'out' : 'err'](MAIL_HELP);
  return help ? 0 : 2;
}
