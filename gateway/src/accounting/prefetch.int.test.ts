// Lease prefetch (docs/adr/0024): a customer with plenty of bandwidth downloading at full loopback speed on
// many connections at once must never be cut while the next lease is drawn, also when the
// database answers slowly (the bench's bulk phase saw 10-12 such cuts). A real gateway process, a real origin, raw sockets that count every
// byte they move. Before the fix the plain downloads were cut (streams paused by back-pressure
// escaped the hold, and the lease drawn after a fast first one was sized for the old rate).
import { describe, expect, it } from '@jest/globals';
import net from 'node:net';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { cacheSynced, gatewaySpec, useTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth } from '#test/gateway/client.ts';
import { recordedUsage } from '#test/gateway/usage.ts';
import { type GatewayProcess } from '#test/gateway/process.ts';

const CONNECTIONS = 32;
const DOWNLOADS_PER_CONNECTION = 4;
const DOWNLOAD_BYTES = 8 * 1024 * 1024;
/** How long the busy database keeps the balance row locked at a time. */
const LOCK_MS = 500;

let pod: GatewayProcess | undefined;

// Each test spawns its gateway process.
const fx = useTestGateway({ gateway: false });

interface Outcome {
  /** Complete answers (head and whole body) received. */
  completed: number;
  /** How the connection ended: 'done', the status line of a refusal, or 'cut' (closed mid-answer). */
  end: string;
  written: number;
  read: number;
}

/**
 * One keep-alive connection downloading `count` bodies one after the other; resolves when the last
 * is complete or the gateway closed the connection (a cut).
 */
function downloads(
  port: number,
  auth: string,
  count: number,
  tunnel: boolean,
  bytes = DOWNLOAD_BYTES,
): Promise<Outcome> {
  const authority = `127.0.0.1:${fx.origin.port}`;
  const request = Buffer.from(
    tunnel
      ? `GET /bytes/${bytes} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`
      : `GET http://${authority}/bytes/${bytes} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${auth}\r\n\r\n`,
  );
  let established = !tunnel;
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let completed = 0;
    let head = Buffer.alloc(0);
    let remaining = -1;
    let end = 'cut';
    const finish = (how?: string) => {
      if (how) end = how;
      socket.destroy();
      resolve({ completed, end, written: socket.bytesWritten, read: socket.bytesRead });
    };
    socket.on('error', () => undefined);
    socket.on('close', () => finish());
    socket.on('connect', () =>
      socket.write(
        tunnel
          ? `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${auth}\r\n\r\n`
          : request,
      ),
    );
    socket.on('data', (chunk: Buffer) => {
      let offset = 0;
      while (offset < chunk.length) {
        if (remaining < 0) {
          head = Buffer.concat([head, chunk.subarray(offset)]);
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) return;
          const text = head.toString('latin1', 0, end);
          if (!established) {
            if (!text.startsWith('HTTP/1.1 200')) return finish(text.split('\r\n')[0]);
            established = true;
            offset = chunk.length - (head.length - end - 4);
            head = Buffer.alloc(0);
            socket.write(request);
            continue;
          }
          const length = /content-length:\s*(\d+)/i.exec(text);
          if (!text.startsWith('HTTP/1.1 200') || !length) return finish(text.split('\r\n')[0]);
          offset = chunk.length - (head.length - end - 4);
          head = Buffer.alloc(0);
          remaining = Number(length[1]);
        }
        const take = Math.min(remaining, chunk.length - offset);
        remaining -= take;
        offset += take;
        if (remaining === 0) {
          remaining = -1;
          if (++completed === count) return finish('done');
          socket.write(request);
        }
      }
    });
  });
}

describe('lease prefetch', () => {
  it.each([
    ['plain requests', false],
    ['CONNECT tunnels', true],
  ])(
    `${CONNECTIONS} connections downloading at full speed (%s) are never cut, and every byte is billed`,
    async (_name, tunnel) => {
      const account = await accountWithBandwidth(fx.db.pool, { basic: 100_000_000_000 });
      pod = await fx.spawn(gatewaySpec('basic'), { PROXYFLEET_LOG_LEVEL: 'info' });
      await cacheSynced(fx.db.pool, 1);
      const auth = basicAuth(account.proxyUsername, account.proxyPassword);
      // The customer's first lease (4 MiB) is granted for one small request; then the downloads
      // start all at once and spend it faster than the busy database grants the next.
      const first = await downloads(pod.port, auth, 1, tunnel, 1_000);
      expect(first).toMatchObject({ completed: 1 });
      // A busy database: the balance row is locked (as a fold or another pod's draw would) for a
      // while, again and again, so a lease asked for late arrives after the last one is spent.
      let busy = true;
      const locker = (async () => {
        while (busy) {
          const client = await fx.db.pool.connect();
          try {
            await client.query('BEGIN');
            await client.query(`SELECT 1 FROM balances WHERE account_id = $1 FOR UPDATE`, [account.id]);
            await new Promise((r) => setTimeout(r, LOCK_MS));
            await client.query('COMMIT');
          } finally {
            client.release();
          }
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      const outcomes = await Promise.all(
        Array.from({ length: CONNECTIONS }, () =>
          downloads(pod!.port, auth, DOWNLOADS_PER_CONNECTION, tunnel),
        ),
      );
      busy = false;
      await locker;
      expect(await pod.stop('SIGTERM')).toBe(0);
      pod = undefined;
      expect(outcomes.map((o) => `${o.completed} ${o.end}`)).toEqual(
        outcomes.map(() => `${DOWNLOADS_PER_CONNECTION} done`),
      );
      const usage = await recordedUsage(fx.db.pool, account.id);
      expect({ up: Number(usage.up), down: Number(usage.down), requests: Number(usage.requests) }).toEqual({
        up: outcomes.reduce((n, o) => n + o.written, first.written),
        down: outcomes.reduce((n, o) => n + o.read, first.read),
        requests: 1 + (tunnel ? CONNECTIONS : CONNECTIONS * DOWNLOADS_PER_CONNECTION),
      });
    },
    120_000,
  );
});
