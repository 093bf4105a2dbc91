// Opening a TCP stream to a destination through an exit: directly (from the exit's source address
// when it has one, source-ports.ts) or through the exit's upstream HTTP proxy with CONNECT.
import net from 'node:net';
import type { Exit } from './exits.ts';
import { dialFrom } from './source-ports.ts';

export class ExitError extends Error {
  readonly kind: 'timeout' | 'refused' | 'upstream_refused';
  /**
   * True when the exit itself is at fault (its upstream proxy unreachable or refusing, its source
   * address unusable): the exit is marked failed and the next one is tried. False when the
   * destination refused or did not answer: that says nothing about the exit, which other
   * customers share, so the customer gets a 502/504 and the exit stays as it is.
   */
  readonly exitFault: boolean;
  /**
   * What failed, for the exit's health (exits.ts): the socket's error code (EADDRNOTAVAIL,
   * ECONNREFUSED, ETIMEDOUT, ...) or what the upstream proxy did (upstream_407, upstream_closed).
   */
  readonly code: string;
  constructor(kind: ExitError['kind'], message: string, exitFault: boolean, code: string) {
    super(message);
    this.kind = kind;
    this.exitFault = exitFault;
    this.code = code;
  }
}

/** Errors binding an exit's source address: the exit's fault, whatever the destination. */
const BIND_ERRORS = new Set(['EADDRNOTAVAIL', 'EADDRINUSE', 'EACCES', 'EPERM', 'EINVAL']);

/** Whether a socket error on a direct exit (or on the way to an upstream) is the exit's fault. */
export function isExitFault(err: NodeJS.ErrnoException, throughUpstream: boolean): boolean {
  return throughUpstream || err.syscall === 'bind' || BIND_ERRORS.has(err.code ?? '');
}

/** Largest upstream CONNECT response head accepted. */
const MAX_UPSTREAM_HEAD = 16 * 1024;

export function openThroughExit(
  exit: Exit,
  dest: { host: string; address: string; port: number },
  timeoutMs: number,
): Promise<net.Socket> {
  if (exit.sourceAddress && exit.ports) {
    return dialFrom(exit.sourceAddress, exit.ports, { host: dest.address, port: dest.port }, timeoutMs).catch(
      (err: NodeJS.ErrnoException) => {
        throw err.code === 'ETIMEDOUT'
          ? new ExitError('timeout', `connect through ${exit.name} timed out`, false, 'ETIMEDOUT')
          : new ExitError('refused', err.message, isExitFault(err, false), err.code ?? 'error');
      },
    );
  }
  return new Promise((resolve, reject) => {
    const direct = !exit.upstream;
    const socket = direct
      ? net.connect({ host: dest.address, port: dest.port, noDelay: true })
      : net.connect({ host: exit.upstream!.host, port: exit.upstream!.port, noDelay: true });
    let done = false;
    const fail = (err: ExitError) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    // Before the TCP connect completes on an upstream exit, it is the upstream that failed; after
    // it, a timeout is the destination being slow to answer the upstream's CONNECT.
    const timer = setTimeout(
      () =>
        fail(
          new ExitError(
            'timeout',
            `connect through ${exit.name} timed out`,
            !direct && socket.connecting,
            'ETIMEDOUT',
          ),
        ),
      timeoutMs,
    );
    socket.on('error', (err: NodeJS.ErrnoException) =>
      fail(new ExitError('refused', err.message, isExitFault(err, !direct), err.code ?? 'error')),
    );
    socket.once('close', () =>
      fail(new ExitError('refused', 'closed during connect', !direct, direct ? 'closed' : 'upstream_closed')),
    );
    socket.once('connect', () => {
      if (direct) {
        done = true;
        clearTimeout(timer);
        socket.removeAllListeners('close');
        resolve(socket);
        return;
      }
      // Chain: CONNECT to the upstream with the destination name, so the name resolves where the
      // exit is (geo DNS answers for the exit's country). Our guard checked what the name means
      // here; what it means at the upstream is the upstream's to guard (docs/adr/0022).
      const authority =
        dest.host.includes(':') && !dest.host.startsWith('[')
          ? `[${dest.host}]:${dest.port}`
          : `${dest.host}:${dest.port}`;
      const auth = exit.upstream!.authorization
        ? `Proxy-Authorization: ${exit.upstream!.authorization}\r\n`
        : '';
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
      let head = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) {
          if (head.length > MAX_UPSTREAM_HEAD)
            fail(
              new ExitError(
                'upstream_refused',
                'upstream response head too large',
                true,
                'upstream_head_too_large',
              ),
            );
          return;
        }
        // Pause first: without a 'data' listener a flowing socket drops what unshift() puts back
        // (the destination's first bytes, when they came in the same packet as the 200). The
        // tunnel's pipe() resumes it.
        socket.pause();
        socket.off('data', onData);
        const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, Math.min(end, 64)).toString('latin1'));
        if (!status || status[1] !== '200') {
          const answered = status?.[1] ?? 'garbage';
          fail(
            new ExitError('upstream_refused', `upstream answered ${answered}`, true, `upstream_${answered}`),
          );
          return;
        }
        const rest = head.subarray(end + 4);
        if (rest.length) socket.unshift(rest);
        done = true;
        clearTimeout(timer);
        socket.removeAllListeners('close');
        resolve(socket);
      };
      socket.on('data', onData);
    });
  });
}
