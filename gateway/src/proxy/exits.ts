// Exits: where a customer's traffic leaves. Each is a local source address to bind (or the
// machine's default) or an upstream HTTP proxy to chain through, labelled with a location.
// Targeting selects the exits whose labels satisfy it (never a broader location: an exit
// labelled only "us" does not serve a request for state "texas"; "*" serves anything).
// Rotating traffic round-robins over them per request; a sticky session ranks them by
// rendezvous hashing of the session's seed, so every pod picks the same one and, if it fails,
// the same next one (docs/adr/0022). An exit whose source address is on no local interface
// (exit-addresses.ts) is left out of every choice until it comes back; each exit keeps what the
// real dials through it said, for the heartbeat and the operator's status (docs/adr/0117).
import { createHash } from 'node:crypto';
import type { Targeting } from '#common/credentials.ts';
import type { ExitSpec } from '../spec.ts';
import { ephemeralRange, SourcePorts, type PortRange } from './source-ports.ts';
import { UpstreamPool } from './upstream-pool.ts';

/** How long a failed exit is tried last. */
export const EXIT_RETRY_MS = 10_000;

export interface Exit {
  name: string;
  country: string;
  state?: string;
  city?: string;
  sourceAddress?: string;
  /** The source ports this exit binds (with sourceAddress; source-ports.ts). */
  ports?: SourcePorts;
  upstream?: { host: string; port: number; authorization?: string };
  /** Keep-alive sockets for plain HTTP through this exit, per destination (docs/adr/0038). */
  pool: UpstreamPool;
  failedUntil: number;
  /** Its source address is on no local interface: no request is sent through it (exit-addresses.ts). */
  missing: boolean;
  /** Epoch milliseconds of the last connection through it that worked, and of the last that failed (0: never). */
  lastSuccessAt: number;
  lastFailureAt: number;
  /** Why the last one failed: the socket's error code (EADDRNOTAVAIL, ECONNREFUSED, ...) or ours (upstream_407). */
  lastError: string;
  /** Failures since the last success. */
  consecutiveFailures: number;
}

/** What the exit is now, as the heartbeat reports it: missing, failing (its last connection failed) or ok. */
export type ExitState = 'ok' | 'failing' | 'missing';

/**
 * One exit's health on the heartbeat (the column gateway_heartbeats.exits, migrations/0175), short
 * keys because every pod writes it every 5 s: name, state, last success and last failure in epoch
 * seconds, consecutive failures and the last error; the last four left out while zero or empty.
 */
export interface ExitReport {
  n: string;
  s: ExitState;
  ls?: number;
  lf?: number;
  cf?: number;
  e?: string;
}

export function exitState(exit: Exit): ExitState {
  return exit.missing ? 'missing' : exit.consecutiveFailures > 0 ? 'failing' : 'ok';
}

export function exitReport(exit: Exit): ExitReport {
  const r: ExitReport = { n: exit.name, s: exitState(exit) };
  if (exit.lastSuccessAt) r.ls = Math.floor(exit.lastSuccessAt / 1000);
  if (exit.lastFailureAt) r.lf = Math.floor(exit.lastFailureAt / 1000);
  if (exit.consecutiveFailures) r.cf = exit.consecutiveFailures;
  if (exit.lastError) r.e = exit.lastError;
  return r;
}

export function buildExit(spec: ExitSpec, range: PortRange = ephemeralRange()): Exit {
  const ports = spec.sourceAddress ? new SourcePorts(range) : undefined;
  const exit: Exit = {
    name: spec.name,
    country: spec.country,
    pool: new UpstreamPool(spec.sourceAddress, ports),
    failedUntil: 0,
    missing: false,
    lastSuccessAt: 0,
    lastFailureAt: 0,
    lastError: '',
    consecutiveFailures: 0,
  };
  if (spec.state) exit.state = spec.state;
  if (spec.city) exit.city = spec.city;
  if (spec.sourceAddress) exit.sourceAddress = spec.sourceAddress;
  if (ports) exit.ports = ports;
  if (spec.upstream) {
    const url = new URL(spec.upstream.url);
    if (url.protocol !== 'http:') throw new Error(`exit ${spec.name}: upstream must be an http:// proxy URL`);
    exit.upstream = { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 80) };
    if (url.username) {
      const creds = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
      exit.upstream.authorization = `Basic ${Buffer.from(creds).toString('base64')}`;
    }
  }
  return exit;
}

export function matches(exit: Exit, t: Targeting): boolean {
  if (exit.country === '*') return true;
  if (t.country && exit.country !== t.country) return false;
  if (t.state && exit.state !== t.state) return false;
  if (t.city && exit.city !== t.city) return false;
  return true;
}

export class ExitPool {
  readonly exits: readonly Exit[];
  private readonly matching = new Map<string, { exits: Exit[]; next: number }>();

  constructor(specs: readonly ExitSpec[]) {
    const range = ephemeralRange();
    this.exits = specs.map((spec) => buildExit(spec, range));
  }

  private group(t: Targeting): { exits: Exit[]; next: number } {
    const key = `${t.country ?? ''}|${t.state ?? ''}|${t.city ?? ''}`;
    let g = this.matching.get(key);
    if (!g) {
      g = { exits: this.exits.filter((e) => !e.missing && matches(e, t)), next: 0 };
      if (this.matching.size > 10_000) this.matching.clear();
      this.matching.set(key, g);
    }
    return g;
  }

  /** Candidates for a rotating request, the chosen one first; empty when nothing matches. */
  rotating(t: Targeting, now = Date.now()): Exit[] {
    const g = this.group(t);
    const n = g.exits.length;
    if (n <= 1) return g.exits;
    const start = g.next++ % n;
    const ordered = [...g.exits.slice(start), ...g.exits.slice(0, start)];
    return healthyFirst(ordered, now);
  }

  /** Candidates for a sticky session, ranked by rendezvous hashing of `seed`. */
  sticky(t: Targeting, seed: string, now = Date.now()): Exit[] {
    const g = this.group(t);
    if (g.exits.length <= 1) return g.exits;
    const ranked = g.exits
      .map((e) => ({
        e,
        score: createHash('sha256').update(seed).update('\0').update(e.name).digest().readBigUInt64BE(),
      }))
      .sort((a, b) => (a.score < b.score ? 1 : a.score > b.score ? -1 : 0))
      .map((x) => x.e);
    return healthyFirst(ranked, now);
  }

  /** A connection through the exit failed by the exit's fault; `error` says why (ExitError.code). */
  markFailed(exit: Exit, error: string, now = Date.now()): void {
    exit.failedUntil = now + EXIT_RETRY_MS;
    exit.lastFailureAt = now;
    exit.lastError = error;
    exit.consecutiveFailures++;
  }

  /** A connection through the exit worked (called per request: no allocation). */
  markHealthy(exit: Exit, now = Date.now()): void {
    if (exit.failedUntil) exit.failedUntil = 0;
    exit.consecutiveFailures = 0;
    exit.lastSuccessAt = now;
  }

  /**
   * The exit's source address left the local interfaces (true) or came back: the choices are
   * recomputed without it, or with it again. Returns whether anything changed.
   */
  setMissing(exit: Exit, missing: boolean): boolean {
    if (exit.missing === missing) return false;
    exit.missing = missing;
    // The groups are cached per targeting: rebuilt on the next request (rare, once per change).
    this.matching.clear();
    return true;
  }

  /** Every exit's health, in spec order (the heartbeat's `exits`). */
  report(): ExitReport[] {
    return this.exits.map(exitReport);
  }

  close(): void {
    for (const e of this.exits) e.pool.destroy();
  }
}

/** Healthy exits in their order, then the failed ones (tried only when nothing else works). */
function healthyFirst(exits: Exit[], now: number): Exit[] {
  if (!exits.some((e) => e.failedUntil > now)) return exits;
  return [...exits.filter((e) => e.failedUntil <= now), ...exits.filter((e) => e.failedUntil > now)];
}
