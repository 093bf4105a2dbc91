// The change relay (docs/adr/0105): the one LISTEN session and the one read of change_log and of
// the changed rows for every gateway and API process. It holds every account's credential row (the
// snapshot a process starts from), keeps the last `keep` changes with their rows (what a process
// that reconnects resumes from), and pushes each batch to every process over its WebSocket. It
// writes the processes' cache_acks rows: the APIs' at once (admin calls wait for them), the
// gateways' all in one statement per heartbeat (docs/adr/0090). Two or more run side by side;
// each is complete on its own (its own feed, its own snapshot).
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { Counter, Gauge, type Registry } from 'prom-client';
import WebSocket, { WebSocketServer } from 'ws';
import { loadCredentialRows, loadKeyRows, type CredentialRow } from '#common/db/change-rows.ts';
import { ChangeFeed, DEFAULT_CATCH_UP_OVERLAP, type Change } from '#common/db/changes.ts';
import { pruneApplied } from '#common/db/feed-common.ts';
import type { Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import { clientMessage, RELAY_BEHIND, RELAY_NOT_READY } from '#common/db/relay-protocol.ts';
import { AckWriter, type AckingProcess } from './acks.ts';

export interface ChangeRelayOptions {
  pool: Pool;
  /** The session URL of its LISTEN (as the ChangeFeed's). */
  databaseUrl: string;
  logger: Logger;
  registry?: Registry;
  /** Changes kept in memory for processes that resume (PROXYFLEET_RELAY_KEEP). */
  keep?: number;
  /** How often each process hears the relay's version and its feed's silence. */
  beatMs?: number;
  /** How often the acks of every process are written (the APIs' are written at once as well). */
  ackMs?: number;
  catchUpOverlap?: number;
  /** A process whose unsent bytes pass this is cut; it resumes on its next connection. */
  maxBufferedBytes?: number;
  /** The relay's own feed's heartbeat (tests shorten it). */
  feedHeartbeatMs?: number;
}

interface Client extends AckingProcess {
  ws: WebSocket;
}

export class ChangeRelay {
  private readonly opts: Required<Omit<ChangeRelayOptions, 'registry'>> &
    Pick<ChangeRelayOptions, 'registry'>;
  private readonly feed: ChangeFeed;
  private readonly credentials = new Map<string, CredentialRow>();
  /** The last changes applied, in the order applied, as sent. */
  private buffer: { id: number; json: string }[] = [];
  /** Every change applied here with an id above this is in `buffer`. */
  private floor = 0;
  private readonly appliedIds = new Set<number>();
  private head = 0;
  /**
   * The number of the last batch sent: one sequence for every connection, so that each batch is
   * serialised once and the same bytes go to every process (a connection starts at its value).
   */
  private seq = 0;
  /** Every credential row as JSON (rebuilt after a batch that changed one). */
  private credentialsJson: string | undefined;
  /** The snapshot message at the current version (rebuilt after any batch), as sent to all. */
  private snapshot: Buffer | undefined;
  private readonly clients = new Set<Client>();
  private readonly wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: 64 * 1024,
  });
  private loaded: Promise<void> | undefined;
  private ready = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly acks: AckWriter<Client>;
  private readonly metrics: { snapshots?: Counter; resumes?: Counter } = {};

  constructor(options: ChangeRelayOptions) {
    this.opts = {
      keep: 10_000,
      beatMs: 1_000,
      ackMs: 5_000,
      catchUpOverlap: DEFAULT_CATCH_UP_OVERLAP,
      maxBufferedBytes: 256 * 1024 * 1024,
      feedHeartbeatMs: 5_000,
      ...options,
    };
    this.feed = new ChangeFeed({
      url: options.databaseUrl,
      logger: options.logger.child({ feed: 'relay' }),
      component: 'relay',
      catchUpOverlap: this.opts.catchUpOverlap,
      heartbeatMs: this.opts.feedHeartbeatMs,
      ...(options.registry ? { registry: options.registry } : {}),
    });
    this.acks = new AckWriter(options.pool, options.logger, (c) => this.clients.has(c));
    const registry = options.registry;
    if (registry) {
      const clients = () => this.clients.size;
      new Gauge({
        name: 'proxyfleet_relay_clients',
        help: 'Processes connected to this change relay',
        registers: [registry],
        collect() {
          this.set(clients());
        },
      });
      this.metrics.snapshots = new Counter({
        name: 'proxyfleet_relay_snapshots_total',
        help: 'Snapshots sent (a process starting, or behind what the relay keeps)',
        registers: [registry],
      });
      this.metrics.resumes = new Counter({
        name: 'proxyfleet_relay_resumes_total',
        help: 'Connections resumed from the changes the relay keeps',
        registers: [registry],
      });
    }
  }

  /** The highest change_log id applied here. */
  get version(): number {
    return this.head;
  }

  /** Whether its LISTEN session is up (a lost one reconnects and catches up from change_log). */
  get databaseConnected(): boolean {
    return this.feed.connected;
  }

  get clientCount(): number {
    return this.clients.size;
  }

  /** LISTENs, then reads every credential row: the snapshot at the change_log head of the start. */
  async start(): Promise<void> {
    this.feed.onChanges((changes) => this.apply(changes));
    await this.feed.start();
    const head = this.feed.version;
    this.loaded = (async () => {
      // The changes up to the head that have committed are in what is read next; one that commits
      // later arrives as a notification and is sent as any other.
      const { rows } = await this.opts.pool.query<{ id: number }>(
        'SELECT id FROM change_log WHERE id > $1 AND id <= $2',
        [Math.max(0, head - this.opts.catchUpOverlap), head],
      );
      for (const r of rows) this.appliedIds.add(Number(r.id));
      for (const row of await loadCredentialRows(this.opts.pool)) this.credentials.set(row.account_id, row);
      this.head = Math.max(this.head, head);
      this.floor = head;
    })();
    await this.loaded;
    this.ready = true;
    this.every(this.opts.beatMs, () => this.beat());
    this.every(this.opts.ackMs, () => void this.acks.write([...this.clients]));
    this.opts.logger.info({ version: this.head, accounts: this.credentials.size }, 'change relay loaded');
  }

  /** Serves the stream on `/changes` (a plain request: 404). */
  async listen(host: string, port: number): Promise<{ port: number; close(): Promise<void> }> {
    const server = http.createServer((_req, res) => res.writeHead(404).end());
    server.on('upgrade', (req, socket, head) => this.upgrade(req, socket, head));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, resolve);
    });
    const address = server.address();
    return {
      port: typeof address === 'object' && address ? address.port : port,
      close: () =>
        new Promise<void>((resolve) => {
          // The streams first: the server waits for its upgraded sockets too.
          for (const c of this.clients) c.ws.terminate();
          this.clients.clear();
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    };
  }

  upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://relay');
    if (url.pathname !== '/changes') {
      socket.destroy();
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, url.searchParams));
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    for (const c of this.clients) c.ws.close(1001, 'relay stopping');
    this.clients.clear();
    this.wss.close();
    await this.acks.settled();
    await this.feed.close();
  }

  private every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    t.unref();
    this.timers.push(t);
  }

  /** A process connects naming its version: the changes after it if kept here, else a snapshot. */
  private accept(ws: WebSocket, params: URLSearchParams): void {
    if (!this.ready) {
      ws.close(RELAY_NOT_READY, 'loading');
      return;
    }
    const version = Number(params.get('version') ?? '0');
    const component = params.get('component');
    if (!Number.isSafeInteger(version) || version < 0) {
      ws.close(1008, 'version');
      return;
    }
    // Behind the process (just started, or its feed is catching up): another relay, or later.
    if (version > this.head) {
      ws.close(RELAY_BEHIND, 'behind');
      return;
    }
    const client: Client = {
      ws,
      instance: params.get('instance') ?? '',
      component: component === 'api' || component === 'gateway' ? component : undefined,
      ack: undefined,
    };
    const from = Math.max(0, version - this.opts.catchUpOverlap);
    if (version > 0 && from >= this.floor) {
      const tail = this.buffer.filter((e) => e.id > from).map((e) => e.json);
      this.raw(client, Buffer.from(`{"type":"changes","seq":${this.seq},"changes":[${tail.join(',')}]}`));
      this.metrics.resumes?.inc();
    } else {
      this.raw(client, this.snapshotMessage());
      this.metrics.snapshots?.inc();
    }
    this.clients.add(client);
    this.raw(client, this.beatMessage(this.silence()));
    ws.on('message', (data) => this.fromClient(client, data));
    ws.on('close', () => {
      this.clients.delete(client);
      this.acks.forget(client);
    });
    ws.on('error', () => ws.terminate());
  }

  private fromClient(client: Client, data: WebSocket.RawData): void {
    const parsed = clientMessage.safeParse(safeJson(data));
    if (!parsed.success) {
      client.ws.terminate();
      return;
    }
    const msg = parsed.data;
    if (msg.type === 'bye') {
      this.acks.bye(client);
      return;
    }
    client.ack = msg.version;
    if (client.component === 'api') this.acks.api(client);
  }

  /** A batch from the feed: read its rows once, keep it, send it to every process. */
  private async apply(changes: Change[]): Promise<void> {
    await this.loaded;
    const fresh = changes.filter((c) => !this.appliedIds.has(c.id));
    const accounts = new Set<string>();
    const hashes = new Set<string>();
    for (const c of fresh) {
      if (c.kind === 'proxy_credentials' || c.kind === 'account') accounts.add(c.accountId);
      if (c.kind === 'api_key' && c.subject && /^[0-9a-f]{64}$/.test(c.subject)) hashes.add(c.subject);
    }
    const [credentials, keys] = await Promise.all([
      accounts.size ? loadCredentialRows(this.opts.pool, [...accounts]) : [],
      hashes.size
        ? loadKeyRows(
            this.opts.pool,
            [...hashes].map((h) => Buffer.from(h, 'hex')),
          )
        : [],
    ]);
    // From here on synchronous: no process connects between the state and the batch sent.
    const byAccount = new Map(credentials.map((r) => [r.account_id, r]));
    const byHash = new Map(keys.map(({ hash, ...row }) => [hash, row]));
    for (const id of accounts) {
      const row = byAccount.get(id);
      if (row) this.credentials.set(id, row);
      else this.credentials.delete(id);
    }
    if (accounts.size) this.credentialsJson = undefined;
    const jsons: string[] = [];
    for (const c of fresh) {
      const wire: Change = { id: c.id, kind: c.kind, accountId: c.accountId, subject: c.subject };
      if (c.kind === 'proxy_credentials' || c.kind === 'account')
        wire.credentials = byAccount.get(c.accountId) ?? null;
      if (c.kind === 'api_key') wire.apiKey = (c.subject && byHash.get(c.subject)) || null;
      const json = JSON.stringify(wire);
      jsons.push(json);
      this.buffer.push({ id: c.id, json });
      this.appliedIds.add(c.id);
      this.head = Math.max(this.head, c.id);
    }
    if (this.buffer.length > this.opts.keep) {
      for (const e of this.buffer.splice(0, this.buffer.length - this.opts.keep))
        this.floor = Math.max(this.floor, e.id);
    }
    pruneApplied(this.appliedIds, this.head, this.opts.catchUpOverlap);
    if (jsons.length === 0) return;
    this.snapshot = undefined;
    this.seq += 1;
    this.broadcast(Buffer.from(`{"type":"changes","seq":${this.seq},"changes":[${jsons.join(',')}]}`));
  }

  /** Every credential row at the current version (one serialisation per version, for all). */
  private snapshotMessage(): Buffer {
    if (this.snapshot) return this.snapshot;
    this.credentialsJson ??= JSON.stringify([...this.credentials.values()]);
    const applied = JSON.stringify([...this.appliedIds]);
    this.snapshot = Buffer.from(
      `{"type":"snapshot","seq":${this.seq},"version":${this.head},"applied":${applied},"credentials":${this.credentialsJson}}`,
    );
    return this.snapshot;
  }

  /** Milliseconds since the feed heard from the database; null while it is not connected. */
  private silence(): number | null {
    const silence = this.feed.connected ? this.feed.silenceMs() : Number.POSITIVE_INFINITY;
    return Number.isFinite(silence) ? Math.max(0, Math.round(silence)) : null;
  }

  private beat(): void {
    this.broadcast(this.beatMessage(this.silence()));
  }

  /** A beat repeats the number of the last batch. */
  private beatMessage(silenceMs: number | null): Buffer {
    return Buffer.from(`{"type":"beat","seq":${this.seq},"version":${this.head},"silenceMs":${silenceMs}}`);
  }

  /** The same bytes to every process: ws frames a Buffer as it is (no copy, no encoding per socket). */
  private broadcast(message: Buffer): void {
    for (const client of this.clients) this.raw(client, message);
  }

  private raw(client: Client, message: Buffer): void {
    const ws = client.ws;
    if (ws.readyState !== WebSocket.OPEN) return;
    if (ws.bufferedAmount > this.opts.maxBufferedBytes) {
      // Too slow to keep up: cut; it resumes from its version on the next connection.
      ws.terminate();
      this.clients.delete(client);
      return;
    }
    ws.send(message, { binary: false });
  }
}

function safeJson(data: WebSocket.RawData): unknown {
  try {
    return JSON.parse(
      Array.isArray(data) ? Buffer.concat(data).toString() : Buffer.from(data as Buffer).toString(),
    );
  } catch {
    return undefined;
  }
}
