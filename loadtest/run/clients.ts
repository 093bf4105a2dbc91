// The admin API and the probes a scenario sends straight to one process (an API, a gateway),
// bypassing HAProxy: customers, revocation timing, one plain request through one gateway.
import net from 'node:net';
import { z } from 'zod';
import type { Fleet } from '../fleet/fleet.ts';
import { sleep } from './context.ts';

export const accountSchema = z.object({
  id: z.string(),
  apiKey: z.string(),
  proxyUsername: z.string(),
  proxyPassword: z.string(),
});
export const keySchema = z.object({ id: z.string(), apiKey: z.string() });
export const passwordSchema = z.object({ proxyUsername: z.string(), proxyPassword: z.string() });
export type Account = z.infer<typeof accountSchema>;

/** An answer of the admin API other than 2xx, with its status (a scenario may retry a 5xx). */
export class AdminApiError extends Error {
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
}

export async function admin(
  fleet: Fleet,
  method: string,
  route: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<unknown> {
  const res = await fetch(`${fleet.apiUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${fleet.adminToken}`, 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  if (!res.ok) throw new AdminApiError(`${method} ${route}: ${res.status} ${text}`, res.status);
  return text ? (JSON.parse(text) as unknown) : undefined;
}

/** A new account with `purchases` (bytes per product). */
export async function customer(
  fleet: Fleet,
  email: string,
  purchases: Record<string, number>,
): Promise<Account> {
  const account = accountSchema.parse(await admin(fleet, 'POST', '/admin/v1/accounts', { email }));
  for (const [product, bytes] of Object.entries(purchases)) {
    await admin(fleet, 'POST', `/admin/v1/accounts/${account.id}/purchases`, { product, gb: bytes / 1e9 });
  }
  return account;
}

// --- probes that measure revocation on each process ------------------------------------------
export async function apiStatus(port: number, key: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/usage`, {
    headers: { 'x-api-key': key },
    signal: AbortSignal.timeout(5000),
  });
  await res.arrayBuffer();
  return res.status;
}

/** One plain request through one gateway process on a fresh connection: its status and bytes. */
export function gatewayRequest(
  port: number,
  credentials: string,
  target: string,
): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(5000, () => socket.destroy(new Error('gateway probe timed out')));
    socket.on('connect', () =>
      socket.write(
        `GET ${target} HTTP/1.1\r\nHost: ${new URL(target).host}\r\nProxy-Authorization: Basic ${Buffer.from(credentials).toString('base64')}\r\nConnection: close\r\n\r\n`,
      ),
    );
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const head = Buffer.concat(chunks).toString('latin1', 0, 64);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, bytes: socket.bytesWritten + socket.bytesRead });
    });
  });
}

/**
 * Time from `since` until the sending of the first probe that is answered `refused` (polling, at
 * most 3 s): every request sent that long after the change is refused.
 */
export async function timeUntilRefused(
  since: number,
  probe: () => Promise<number>,
  refused: number,
): Promise<number> {
  while (Date.now() - since < 3000) {
    const sent = Date.now();
    if ((await probe()) === refused) return sent - since;
    await sleep(2);
  }
  return Infinity;
}

/** One plain GET through one gateway process; the origin's x-exit answer (its body for /ip). */
export async function fetchThroughProxy(
  port: number,
  credentials: string,
  target: string,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(5000, () => socket.destroy());
    socket.on('connect', () =>
      socket.write(
        `GET ${target} HTTP/1.1\r\nHost: ${new URL(target).host}\r\nProxy-Authorization: Basic ${Buffer.from(credentials).toString('base64')}\r\nConnection: close\r\n\r\n`,
      ),
    );
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => resolve(undefined));
    socket.on('close', () =>
      resolve(/\r\nx-exit: ([^\r]+)/i.exec(Buffer.concat(chunks).toString('latin1'))?.[1]),
    );
  });
}
