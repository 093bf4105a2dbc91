// Test harness: N requests released at once over real sockets. Each request is written but its last
// byte; once every socket has flushed its part, the last bytes go out together, so the server reads
// N complete requests within one turn of its event loop: what a script does to race a
// check-then-record throttle (docs/security.md, "Throttles").
import { connect, type Socket } from 'node:net';

export interface BurstAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A form POST as raw HTTP/1.1 (Connection: close), with the given cookie and extra headers. */
export function rawFormPost(
  pathName: string,
  fields: Record<string, string>,
  cookie: string,
  headers: Record<string, string> = {},
): string {
  const body = new URLSearchParams(fields).toString();
  const lines = [
    `POST ${pathName} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Connection: close',
    'Content-Type: application/x-www-form-urlencoded',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `Cookie: ${cookie}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

function parseAnswer(raw: Buffer): BurstAnswer {
  const text = raw.toString('utf8');
  const end = text.indexOf('\r\n\r\n');
  const [statusLine, ...headerLines] = text.slice(0, end < 0 ? text.length : end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0),
    headers,
    body: end < 0 ? '' : text.slice(end + 4),
  };
}

const written = (socket: Socket, data: string | Buffer) =>
  new Promise<void>((resolve, reject) => socket.write(data, (err) => (err ? reject(err) : resolve())));

/**
 * Sends every request, all but its last byte first and the last bytes together; each answer in
 * the order of `requests`. Answers are read until the server closes (requests say Connection: close).
 * `onFirstAnswer` runs when the server has answered one of them: the others are in its hands.
 */
export async function burst(
  port: number,
  requests: string[],
  onFirstAnswer?: () => void,
): Promise<BurstAnswer[]> {
  const sockets = await Promise.all(
    requests.map(
      () =>
        new Promise<Socket>((resolve, reject) => {
          const s = connect({ host: '127.0.0.1', port }, () => resolve(s));
          s.once('error', reject);
        }),
    ),
  );
  let first = onFirstAnswer;
  const answers = sockets.map(
    (s) =>
      new Promise<Buffer>((resolve, reject) => {
        const chunks: Buffer[] = [];
        s.on('data', (c: Buffer) => {
          const call = first;
          first = undefined;
          call?.();
          chunks.push(c);
        });
        s.once('error', reject);
        s.once('close', () => resolve(Buffer.concat(chunks)));
      }),
  );
  const bytes = requests.map((r) => Buffer.from(r, 'utf8'));
  await Promise.all(sockets.map((s, i) => written(s, bytes[i]!.subarray(0, -1))));
  // Every head and all but one byte of every body are on the server's side of the sockets now.
  await new Promise((resolve) => setTimeout(resolve, 200));
  for (const [i, s] of sockets.entries()) s.write(bytes[i]!.subarray(-1));
  return (await Promise.all(answers)).map(parseAnswer);
}

/** How many answers had each status, e.g. {401: 5, 429: 25}. */
export function statusCounts(answers: BurstAnswer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
  return counts;
}
