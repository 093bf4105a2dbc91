// The emails the dev mail sink of `npm start` (dev/mail-sink.ts) keeps as .eml files under
// <PROXYFLEET_DATA_DIR>/mail, read back for `npx proxyfleet mail list` / `mail show <n>`. Only the
// CLI reads them (the dev entrypoint's tests go through the CLI).
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { simpleParser, type AddressObject } from 'mailparser';

export interface StoredMail {
  /** 1 = the oldest. */
  n: number;
  file: string;
  date: string;
  to: string;
  subject: string;
}

/** The kept emails, oldest first (file names start with the time they arrived). */
export async function listMail(dir: string): Promise<StoredMail[]> {
  const files = (await readdir(dir).catch(() => [] as string[]))
    .filter((f) => f.endsWith('.eml') && !f.startsWith('.'))
    .sort();
  const out: StoredMail[] = [];
  for (const [i, file] of files.entries()) {
    const mail = await simpleParser(await readFile(path.join(dir, file)));
    out.push({
      n: i + 1,
      file,
      date: mail.date?.toISOString() ?? '',
      to: addressText(mail.to),
      subject: mail.subject ?? '',
    });
  }
  return out;
}

/** One email as text: its headers that matter, then the body. */
export async function showMail(dir: string, n: number): Promise<string | undefined> {
  const files = (await readdir(dir).catch(() => [] as string[]))
    .filter((f) => f.endsWith('.eml') && !f.startsWith('.'))
    .sort();
  const file = files[n - 1];
  if (!file) return undefined;
  const mail = await simpleParser(await readFile(path.join(dir, file)));
  return (
    `From: ${addressText(mail.from)}\nTo: ${addressText(mail.to)}\nDate: ${mail.date?.toISOString() ?? ''}\n` +
    `Subject: ${mail.subject ?? ''}\nMessage-ID: ${mail.messageId ?? ''}\nFile: ${path.join(dir, file)}\n\n${mail.text ?? ''}`
  );
}

function addressText(field: AddressObject | AddressObject[] | undefined): string {
  return (Array.isArray(field) ? field : field ? [field] : []).map((a) => a.text).join(', ');
}
