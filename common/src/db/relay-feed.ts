// The change relay's client (docs/adr/0105): the ChangeFeed's interface, fed by one WebSocket to a
// relay instead of a LISTEN session of its own. The changes arrive with their rows, so the caches
// read nothing; the start is the relay's snapshot, delivered as one change per account. On every
// (re)connect the process names the version it has: the relay answers with the changes after it
// (from its memory) or, when it no longer keeps them all, a snapshot, which reaches the handlers
// as a change of every account known before or now (the caches compare, as for any change).
// The stream is checked: messages are validated, numbered (a gap, garbage, a stall or a relay
// behind the process drops the connection and the next one resumes from the version), and the
// relay's beat says when its feed last heard from the database: trust is as with the ChangeFeed.
import type { Registry } from 'prom-client';
import WebSocket from 'ws';
import type { Logger } from '../logger.ts';
import { ChangeFeed, DEFAULT_CATCH_UP_OVERLAP, reconnectDelayMs } from './changes.ts';
import { FeedBase, pruneApplied, registerFeedGauges, type Change, type ChangeSource } from './feed-common.ts';
import { relayMessage, type ClientMessage, type RelayMessage } from './relay-protocol.ts';

export interface RelayFeedOptions {
  /** The relay's stream URLs (PROXYFLEET_RELAY_URL, comma-separated): tried in turn. */
  urls: readonly string[];
  logger: Logger;
  registry?: Registry;
  component: string;
  /**
   * Reported through the relay into cache_acks (the relay writes gateways' on its heartbeat).
   * `batched` (the gateways'): at most one ack a second, the version applied by then; else one
   * after each batch (the API's: admin calls wait for them).
   */
  ack?: { instance: string; component: 'api' | 'gateway'; batched?: boolean };
  /** Nothing received this long (the relay beats every second): the stream is cut and reopened. */
  stallMs?: number;
  maxBackoffMs?: number;
  /** As the ChangeFeed's: ids can commit out of order, so a resume re-asks this many below. */
  catchUpOverlap?: number;
  /** start() gives up after this long without a snapshot. */
  startTimeoutMs?: number;
}

const DEFAULT_STALL_MS = 5_000;
/** A batched ack's least interval (the relay writes them every 5 s). */
const BATCHED_ACK_MS = 1_000;

export class RelayFeed extends FeedBase implements ChangeSource {
  readonly snapshots = true;
  private readonly opts: RelayFeedOptions &
    Required<Pick<RelayFeedOptions, 'stallMs' | 'maxBackoffMs' | 'catchUpOverlap' | 'startTimeoutMs'>>;
  private socket: WebSocket | undefined;
  private readonly appliedIds = new Set<number>();
  /** Accounts with a credential row (a snapshot changes those gone too). */
  private readonly known = new Set<string>();
  private lastMessage = 0;
  /** The number of the last message on this connection; undefined before its first. */
  private seq: number | undefined;
  private lastAckAt = 0;
  private ackTimer: NodeJS.Timeout | undefined;
  private urlIndex = 0;
  private failures = 0;
  private queue: Promise<void> = Promise.resolve();
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stallTimer: NodeJS.Timeout | undefined;
  private started: { resolve: () => void } | undefined;
  /** Whether the handlers now run on a snapshot's changes (one per account, each of its version). */
  applyingSnapshot = false;
  /** Snapshots and resumes received (tests and the load generator count them). */
  readonly counts = { snapshots: 0, resumes: 0, drops: 0 };

  constructor(options: RelayFeedOptions) {
    super();
    if (options.urls.length === 0) throw new Error('RelayFeed needs at least one URL');
    this.opts = {
      stallMs: DEFAULT_STALL_MS,
      maxBackoffMs: 1_000,
      catchUpOverlap: DEFAULT_CATCH_UP_OVERLAP,
      startTimeoutMs: 60_000,
      ...options,
    };
    if (options.registry) registerFeedGauges(options.registry, options.component, this);
  }

  /** Connects (trying the URLs in turn) and returns once the first snapshot reached the handlers. */
  async start(): Promise<void> {
    const done = new Promise<void>((resolve) => (this.started = { resolve }));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no snapshot from the change relay within ${this.opts.startTimeoutMs} ms`)),
        this.opts.startTimeoutMs,
      );
    });
    this.stallTimer = setInterval(() => this.checkStall(), Math.max(50, this.opts.stallMs / 4));
    this.stallTimer.unref();
    this.connect();
    try {
      await Promise.race([done, timeout]);
    } catch (err) {
      await this.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    clearTimeout(this.reconnectTimer);
    clearInterval(this.stallTimer);
    clearTimeout(this.ackTimer);
    const socket = this.socket;
    this.socket = undefined;
    await this.queue;
    if (socket?.readyState === WebSocket.OPEN) {
      // A process that stops no longer counts towards "n/n synced".
      if (this.opts.ack) send(socket, { type: 'bye' });
      await new Promise<void>((resolve) => {
        socket.once('close', () => resolve());
        socket.close(1000);
        setTimeout(() => (socket.terminate(), resolve()), 1_000).unref();
      });
    } else socket?.terminate();
  }

  private connect(): void {
    if (this.state === 'closed') return;
    this.state = 'connecting';
    const url = new URL(this.opts.urls[this.urlIndex % this.opts.urls.length]!);
    url.searchParams.set('version', String(this.appliedVersion));
    url.searchParams.set('component', this.opts.ack?.component ?? '');
    url.searchParams.set('instance', this.opts.ack?.instance ?? '');
    const socket = new WebSocket(url, { handshakeTimeout: 5_000, perMessageDeflate: false });
    this.socket = socket;
    this.seq = undefined;
    this.lastMessage = Date.now();
    socket.on('message', (data, isBinary) => this.received(socket, data, isBinary));
    socket.on('close', (code, reason) => this.drop(socket, `closed (${code} ${reason.toString()})`));
    socket.on('error', (err) => this.drop(socket, err.message));
  }

  private checkStall(): void {
    const socket = this.socket;
    if (socket && this.state !== 'closed' && Date.now() - this.lastMessage > this.opts.stallMs)
      this.drop(socket, `nothing received for ${this.opts.stallMs} ms`);
  }

  /** Any sign of a broken stream: only the first for the current socket reconnects. */
  private drop(socket: WebSocket, reason: string): void {
    if (this.state === 'closed' || socket !== this.socket) return;
    this.socket = undefined;
    socket.removeAllListeners('message');
    socket.terminate();
    this.state = 'idle';
    this.failures += 1;
    this.counts.drops += 1;
    this.urlIndex += 1;
    const delay = reconnectDelayMs(this.failures, this.opts.maxBackoffMs);
    this.opts.logger.warn({ reason, retryMs: delay }, 'change relay stream lost');
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
    this.reconnectTimer.unref();
  }

  private received(socket: WebSocket, data: WebSocket.RawData, isBinary: boolean): void {
    if (socket !== this.socket) return;
    this.lastMessage = Date.now();
    let msg: RelayMessage;
    try {
      if (isBinary) throw new Error('binary message');
      msg = relayMessage.parse(JSON.parse(rawText(data)));
    } catch (err) {
      this.drop(socket, `unreadable message: ${(err as Error).message.slice(0, 200)}`);
      return;
    }
    // The relay numbers its batches (one sequence for all its connections); a connection starts at
    // the number of its first message, each batch after adds one and a beat repeats the last: a
    // gap is a lost message.
    if (this.seq !== undefined) {
      const expected = msg.type === 'beat' ? this.seq : this.seq + 1;
      if (msg.seq !== expected) {
        this.drop(socket, `message ${msg.seq} where ${expected} was due`);
        return;
      }
    }
    this.seq = msg.seq;
    if (msg.type === 'beat') {
      if (msg.silenceMs !== null) this.lastHeard = Math.max(this.lastHeard, Date.now() - msg.silenceMs);
      return;
    }
    this.queue = this.queue.then(async () => {
      if (socket !== this.socket) return; // the next connection resumes from the version
      try {
        if (msg.type === 'snapshot') await this.applySnapshot(msg);
        else await this.applyChanges(msg.changes);
      } catch (err) {
        this.opts.logger.error({ err }, 'change handler failed; the relay will send the batch again');
        this.drop(socket, 'handler failed');
        return;
      }
      if (this.state === 'connecting') {
        this.state = 'connected';
        this.failures = 0;
        if (msg.type === 'changes') this.counts.resumes += 1;
        this.started?.resolve();
        this.started = undefined;
      }
      this.ack();
    });
  }

  /** The version applied, to the relay: at once, or batched at most once a second. */
  private ack(): void {
    if (!this.opts.ack) return;
    const wait = this.opts.ack.batched ? this.lastAckAt + BATCHED_ACK_MS - Date.now() : 0;
    if (wait <= 0) {
      clearTimeout(this.ackTimer);
      this.ackTimer = undefined;
      this.lastAckAt = Date.now();
      if (this.socket) send(this.socket, { type: 'ack', version: this.appliedVersion });
      return;
    }
    // The version applied by then, on the connection of then (a new one takes the old one's due).
    this.ackTimer ??= setTimeout(() => {
      this.ackTimer = undefined;
      if (this.state !== 'closed') this.ack();
    }, wait);
    this.ackTimer.unref();
  }

  private async applySnapshot(msg: Extract<RelayMessage, { type: 'snapshot' }>): Promise<void> {
    const changes: Change[] = msg.credentials.map((row) => ({
      id: msg.version,
      kind: 'account',
      accountId: row.account_id,
      subject: null,
      credentials: row,
    }));
    const now = new Set(msg.credentials.map((r) => r.account_id));
    for (const accountId of this.known)
      if (!now.has(accountId))
        changes.push({ id: msg.version, kind: 'account', accountId, subject: null, credentials: null });
    this.applyingSnapshot = true;
    try {
      await this.runHandlers(changes);
    } finally {
      this.applyingSnapshot = false;
    }
    this.counts.snapshots += 1;
    this.known.clear();
    for (const id of now) this.known.add(id);
    this.appliedVersion = msg.version;
    this.appliedIds.clear();
    for (const id of msg.applied) this.appliedIds.add(id);
  }

  private async applyChanges(all: Change[]): Promise<void> {
    const changes = all.filter((c) => !this.appliedIds.has(c.id));
    await this.runHandlers(changes);
    for (const c of changes) {
      this.appliedVersion = Math.max(this.appliedVersion, c.id);
      this.appliedIds.add(c.id);
      if (c.credentials === null) this.known.delete(c.accountId);
      else if (c.credentials) this.known.add(c.accountId);
    }
    pruneApplied(this.appliedIds, this.appliedVersion, this.opts.catchUpOverlap);
  }
}

function send(socket: WebSocket, msg: ClientMessage): void {
  if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(msg));
}

function rawText(data: WebSocket.RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.from(data).toString('utf8');
}

/** PROXYFLEET_RELAY_URL's URLs. */
export function relayUrls(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * The process's change source: the relay's stream when PROXYFLEET_RELAY_URL is set, else its own
 * LISTEN session (ChangeFeed).
 */
export function openChangeSource(opts: {
  relayUrl: string | undefined;
  databaseUrl: string;
  logger: Logger;
  registry?: Registry;
  component: string;
  ack?: { instance: string; component: 'api' | 'gateway'; batched?: boolean };
}): ChangeSource {
  const common = {
    logger: opts.logger,
    component: opts.component,
    ...(opts.registry ? { registry: opts.registry } : {}),
    ...(opts.ack ? { ack: opts.ack } : {}),
  };
  return opts.relayUrl
    ? new RelayFeed({ urls: relayUrls(opts.relayUrl), ...common })
    : new ChangeFeed({ url: opts.databaseUrl, ...common });
}
