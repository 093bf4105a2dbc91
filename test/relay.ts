// Test support for the change relay (docs/adr/0105): real relays on port 0 over a test database,
// and pods: a RelayFeed with the gateway's own CredentialCache behind it, whose pool refuses every
// query (a pod that reads the database fails the test), recording every change it was handed.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Change } from '#common/db/changes.ts';
import type { Pool } from '#common/db/pool.ts';
import { RelayFeed, type RelayFeedOptions } from '#common/db/relay-feed.ts';
import { createLogger } from '#common/logger.ts';
import { CredentialCache } from '../gateway/src/auth/cache.ts';
import { ChangeRelay, type ChangeRelayOptions } from '../relay/src/relay.ts';
import type { TestDatabase } from './db.ts';

export const quiet = createLogger('test', 'silent');

export interface TestRelay {
  relay: ChangeRelay;
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startRelay(
  db: Pick<TestDatabase, 'url' | 'pool'>,
  opts: Partial<ChangeRelayOptions> = {},
): Promise<TestRelay> {
  const relay = new ChangeRelay({
    pool: db.pool,
    databaseUrl: db.url,
    logger: quiet,
    beatMs: 200,
    ackMs: 500,
    feedHeartbeatMs: 500,
    ...opts,
  });
  await relay.start();
  const server = await relay.listen('127.0.0.1', 0);
  return {
    relay,
    port: server.port,
    url: `ws://127.0.0.1:${server.port}/changes`,
    async close() {
      await server.close();
      await relay.close();
    },
  };
}

/** A pool that fails every query: a pod fed by the relay must not need one. */
export const noQueries = {
  query: () => Promise.reject(new Error('a pod fed by the relay read the database')),
} as unknown as Pool;

export interface TestPod {
  feed: RelayFeed;
  cache: CredentialCache;
  /** Every change handed to the handlers, snapshots' included. */
  seen: Change[];
  /** Ids of real changes (not a snapshot's) handed over, in order. */
  ids: number[];
  revoked: string[];
}

export async function startPod(urls: string[], opts: Partial<RelayFeedOptions> = {}): Promise<TestPod> {
  const feed = new RelayFeed({
    urls,
    logger: quiet,
    component: 'gateway',
    stallMs: 1_500,
    maxBackoffMs: 200,
    ...opts,
  });
  const cache = new CredentialCache(noQueries);
  const pod: TestPod = { feed, cache, seen: [], ids: [], revoked: [] };
  feed.onChanges(async (changes) => {
    pod.seen.push(...changes);
    if (!feed.applyingSnapshot) for (const c of changes) pod.ids.push(c.id);
    pod.revoked.push(...(await cache.apply(changes)));
  });
  await feed.start();
  return pod;
}

export const sha256Hex = (key: string) => createHash('sha256').update(key).digest('hex');

/** A stand-in relay that does `behave` with each connection (a stream that misbehaves). */
export async function fakeRelay(
  behave: (ws: WebSocket, socket: Duplex) => void,
): Promise<{ url: string; connections: () => number; close(): Promise<void> }> {
  const wss = new WebSocketServer({ noServer: true });
  let connections = 0;
  const server = http.createServer();
  server.on('upgrade', (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      connections += 1;
      behave(ws, socket);
    }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/changes`,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of wss.clients) ws.terminate();
        server.close(() => resolve());
      }),
  };
}
