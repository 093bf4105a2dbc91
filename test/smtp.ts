// A real SMTP server for the email tests (smtp-server), on 127.0.0.1 and port 0 unless told. It
// records every accepted message parsed by mailparser, and answers RCPT TO for the addresses in
// `reject` with the given SMTP code (550 permanent, 451 temporary). STARTTLS is disabled: the
// package's built-in certificate has expired (smtp-server 3.21, tried on this project).
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export const TEST_SMTP_USER = 'alerts';
export const TEST_SMTP_PASSWORD = 'smtp-test-password';

export interface TestSmtpServer {
  port: number;
  /** smtp://user:password@127.0.0.1:port */
  url: string;
  messages: ParsedMail[];
  /** Recipient address -> SMTP reply code for RCPT TO. */
  reject: Map<string, number>;
  close(): Promise<void>;
}

export async function startTestSmtpServer(
  options: { port?: number; dataDelayMs?: number } = {},
): Promise<TestSmtpServer> {
  const messages: ParsedMail[] = [];
  const reject = new Map<string, number>();
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === TEST_SMTP_USER && auth.password === TEST_SMTP_PASSWORD) {
        callback(null, { user: auth.username });
      } else {
        callback(smtpError(535, 'authentication failed'));
      }
    },
    onRcptTo(address, _session, callback) {
      const code = reject.get(address.address);
      callback(code ? smtpError(code, `recipient refused with ${code}`) : undefined);
    },
    onData(stream, _session, callback) {
      simpleParser(stream)
        .then(async (mail) => {
          if (options.dataDelayMs) await new Promise((r) => setTimeout(r, options.dataDelayMs));
          messages.push(mail);
          callback();
        })
        .catch((err: Error) => callback(err));
    },
  });
  server.listen(options.port ?? 0, '127.0.0.1');
  await once(server.server, 'listening');
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    url: `smtp://${TEST_SMTP_USER}:${TEST_SMTP_PASSWORD}@127.0.0.1:${port}`,
    messages,
    reject,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The addresses of a parsed To or From header. */
export function addresses(field: AddressObject | AddressObject[] | undefined): (string | undefined)[] {
  return (Array.isArray(field) ? field : field ? [field] : []).flatMap((a) => a.value.map((v) => v.address));
}

function smtpError(responseCode: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode });
}
