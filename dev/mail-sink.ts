// The dev mail sink: with no PROXYFLEET_SMTP_URL, `npm start` runs a local SMTP server
// (smtp-server) on 127.0.0.1 and keeps every email it is given as an .eml file under
// <PROXYFLEET_DATA_DIR>/mail/, so the alert emails can be read: `npx proxyfleet mail list`,
// `npx proxyfleet mail show <n>`, or any mail client that opens .eml files.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';

export interface MailSink {
  /** smtp://127.0.0.1:<port>, for the worker's sender. */
  url: string;
  dir: string;
  close(): Promise<void>;
}

export async function startMailSink(dir: string): Promise<MailSink> {
  await mkdir(dir, { recursive: true });
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    authOptional: true,
    logger: false,
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', (err: Error) => callback(err));
      stream.on('end', () => {
        // Written under a temporary name, then renamed: `mail list` never sees half a file.
        const name = `${new Date().toISOString().replace(/[:.]/g, '-')}-${randomBytes(3).toString('hex')}.eml`;
        const tmp = path.join(dir, `.${name}.tmp`);
        writeFile(tmp, Buffer.concat(chunks))
          .then(() => rename(tmp, path.join(dir, name)))
          .then(
            () => callback(),
            (err: Error) => callback(err),
          );
      });
    },
  });
  server.listen(0, '127.0.0.1');
  await once(server.server, 'listening');
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    dir,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
