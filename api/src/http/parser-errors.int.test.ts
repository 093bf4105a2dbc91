// A request node's HTTP parser cannot read (a malformed request line, a header without a colon, a
// control character in a header value, a header block above the limit) is answered 400 in the
// API's JSON format (docs/security.md, "Malformed input"), over a raw socket because no HTTP
// client sends such bytes. Before, the server closed the connection without a word.
import net from 'node:net';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';

let db: TestDatabase;
let api: TestApi;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

/** Writes `raw` and reads until the server closes the connection. */
function exchange(raw: string): Promise<string> {
  const { port } = new URL(api.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(raw));
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
  });
}

const CASES: Record<string, string> = {
  'a malformed request line': 'GET /api/v1/usage HTTP/1.1 extra\r\nHost: x\r\n\r\n',
  'a request line that is not HTTP': 'HELLO\r\n\r\n',
  'a header without a colon': 'GET /api/v1/usage HTTP/1.1\r\nHost: x\r\nX-Api-Key svc_live_x\r\n\r\n',
  'a control character in a header value': 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Thing: a\u0001b\r\n\r\n',
  'a space before the colon': 'GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n',
  'a header block above the limit': `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
  'Content-Length and Transfer-Encoding together':
    'POST /api/v1/sub-users HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
};

test.each(Object.entries(CASES))(
  '%s: 400 in the API format, then the connection closes',
  async (_name, raw) => {
    const answer = await exchange(raw);
    const [head = '', body] = answer.split('\r\n\r\n');
    expect(head.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    expect(head).toMatch(/^content-type: application\/json; charset=utf-8$/im);
    expect(head).toMatch(/^connection: close$/im);
    expect(head).toMatch(/^x-content-type-options: nosniff$/im);
    expect(JSON.parse(body ?? '')).toEqual({ success: false, error: 'Bad request' });
  },
);

test('a well-formed request on a fresh connection is still served', async () => {
  const answer = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
});
