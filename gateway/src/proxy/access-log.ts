// The access log (docs/adr/0023): one line per completed request, per completed tunnel and
// per refusal, with plan, kind, status, reason (the refusal table's label), bytes up and down on the
// customer's connection, milliseconds, exit, account id, method and destination host:port.
// Never a path or query, never a header, never credentials: the line is built here from fields
// that cannot hold them (docs/gateway.md, "Access log").
//
// Levels: a sample of the lines (PROXYFLEET_GATEWAY_ACCESS_LOG_SAMPLE, default 1 %) at info, plus
// every refusal whose cause is on the provider's side (ALWAYS below) at info; every other line at
// debug. Nothing is built for a line that is not logged: the decision comes first.
//
// Bytes are the customer socket's counters, the ones billing reads, since the previous line's
// request on the same connection (a keep-alive connection's lines add up to what was billed).
import type http from 'node:http';
import type net from 'node:net';
import type { Logger } from '#common/logger.ts';
import type { HistoryTally } from '../accounting/history.ts';
import type { TargetTally } from '../accounting/targets.ts';
import { wireOf } from '../accounting/wire.ts';
import type { Exit } from './exits.ts';
import type { Refusal } from './http-util.ts';

/** The default share of lines logged at info (PROXYFLEET_GATEWAY_ACCESS_LOG_SAMPLE). */
export const DEFAULT_ACCESS_LOG_SAMPLE = 0.01;

/** Refusal reasons logged at info whatever the sample: the exits', the database's or the configuration's fault. */
const ALWAYS = new Set(['exit_failed', 'exit_timeout', 'no_exit', 'billing_unavailable']);

export type AccessKind = 'http' | 'connect' | 'socks5' | 'upgrade';
/** The destination as parsed (absolute-form URL or CONNECT authority); only host and port are logged. */
export type AccessTarget = URL | { host: string; port: number } | undefined;

interface Marks {
  read: number;
  written: number;
}

export class AccessLog {
  private readonly logger: Logger;
  private readonly plan: string;
  private readonly sample: number;
  private readonly random: () => number;
  /** Socket counters at the end of the connection's previous line. */
  private readonly marks = new WeakMap<net.Socket, Marks>();
  /** Target statistics (docs/adr/0026): fed from the same per-line bytes, for billed lines only. */
  private readonly targets: TargetTally | undefined;
  /** Usage history with outcomes (docs/adr/0103): every line that names an account. */
  private readonly history: HistoryTally | undefined;

  constructor(
    logger: Logger,
    plan: string,
    sample: number,
    random: () => number = Math.random,
    targets?: TargetTally,
    history?: HistoryTally,
  ) {
    this.logger = logger;
    this.plan = plan;
    this.sample = sample;
    this.random = random;
    this.targets = targets;
    this.history = history;
  }

  /**
   * A request or tunnel ended with `status` (0: nothing was answered) and, unless it completed
   * normally, a `reason`: the refusal table's label, `cut` (the answer or tunnel was cut short) or
   * `client_abandoned` (the customer left before any answer). `started`: performance.now() when
   * the request head had arrived.
   */
  done(
    kind: AccessKind,
    socket: net.Socket,
    status: number,
    reason: string | undefined,
    started: number,
    method?: string,
    target?: AccessTarget,
    account?: string,
    exit?: Exit,
  ): void {
    this.line(kind, socket, status, reason, started, method, target, account, exit, true);
  }

  /** One line; `billed`: the line's bytes are billed (not a refusal), so target statistics count it. */
  private line(
    kind: AccessKind,
    socket: net.Socket,
    status: number,
    reason: string | undefined,
    started: number,
    method: string | undefined,
    target: AccessTarget,
    account: string | undefined,
    exit: Exit | undefined,
    billed: boolean,
  ): void {
    const [up, down] = this.bytes(socket);
    // `account` or `account/sub-user` (context.ts, accessAccount): a sub-user's line names both.
    const slash = account ? account.indexOf('/') : -1;
    const subUser = slash < 0 ? undefined : account!.slice(slash + 1);
    if (slash >= 0) account = account!.slice(0, slash);
    if (billed && account && target && this.targets)
      this.targets.add(
        account,
        target instanceof URL ? target.hostname : target.host,
        up + down,
        undefined,
        subUser,
      );
    if (account && this.history)
      this.history.add(account, subUser ?? '', kind === 'http', status, reason, up, down, billed);
    const level = this.level(reason !== undefined && ALWAYS.has(reason));
    if (!level) return;
    this.logger[level](
      {
        plan: this.plan,
        kind,
        status,
        ...(reason ? { reason } : {}),
        up,
        down,
        ms: Math.round(performance.now() - started),
        ...exitFields(exit),
        // The customer's address: a trusted balancer's PROXY header's when there was one.
        ...(socket.remoteAddress ? { client: socket.remoteAddress } : {}),
        ...(account ? { account } : {}),
        ...(subUser ? { subUser } : {}),
        ...(method ? { method } : {}),
        ...(target ? { target: authority(target) } : {}),
      },
      'access',
    );
  }

  /** A refusal, after it was written (its bytes count) or found unsendable (`sent` false). */
  refused(
    kind: AccessKind,
    socket: net.Socket,
    refusal: Refusal,
    sent: boolean,
    started: number,
    method?: string,
    target?: AccessTarget,
    account?: string,
    exit?: Exit,
  ): void {
    if (sent)
      this.line(kind, socket, refusal.status, refusal.reason, started, method, target, account, exit, false);
    else this.line(kind, socket, 0, 'client_abandoned', started, method, target, account, exit, false);
  }

  /** A plain request's answer closed: relayed (complete or cut) or refused after the exit was chosen. */
  response(
    res: http.ServerResponse,
    refusal: Refusal | undefined,
    started: number,
    method: string | undefined,
    target: AccessTarget,
    account: string | undefined,
    exit: Exit | undefined,
  ): void {
    const socket = res.req.socket;
    // A refusal after admission is not billed (Tab.refused); an answer cut short or abandoned is.
    const billed = refusal === undefined;
    if (!res.headersSent) {
      this.line('http', socket, 0, 'client_abandoned', started, method, target, account, exit, billed);
      return;
    }
    const reason = refusal?.reason ?? (res.writableFinished ? undefined : 'cut');
    this.line('http', socket, res.statusCode, reason, started, method, target, account, exit, billed);
  }

  /** Whether and at which level to log; undefined: not at all (and nothing gets built). */
  private level(always: boolean): 'info' | 'debug' | undefined {
    if ((always || (this.sample > 0 && this.random() < this.sample)) && this.logger.isLevelEnabled('info'))
      return 'info';
    return this.logger.isLevelEnabled('debug') ? 'debug' : undefined;
  }

  /** Bytes since the connection's previous line; moves the mark whether or not a line is logged. */
  private bytes(socket: net.Socket): [number, number] {
    // The counters billing reads: under TLS, the TCP socket's (accounting/wire.ts).
    const wire = wireOf(socket);
    const read = wire.bytesRead;
    const written = wire.bytesWritten;
    const mark = this.marks.get(socket);
    if (!mark) {
      this.marks.set(socket, { read, written });
      return [read, written];
    }
    const up = read - mark.read;
    const down = written - mark.written;
    mark.read = read;
    mark.written = written;
    return [up, down];
  }
}

function authority(t: URL | { host: string; port: number }): string {
  if (t instanceof URL) return `${t.hostname}:${t.port || 80}`;
  return t.host.includes(':') && !t.host.startsWith('[') ? `[${t.host}]:${t.port}` : `${t.host}:${t.port}`;
}

/** The exit's name and where it leaves from (its source address, or its upstream's host:port). */
function exitFields(exit: Exit | undefined): { exit?: string; exitAddress?: string } {
  if (!exit) return {};
  const address =
    exit.sourceAddress ?? (exit.upstream ? `${exit.upstream.host}:${exit.upstream.port}` : undefined);
  return address ? { exit: exit.name, exitAddress: address } : { exit: exit.name };
}
