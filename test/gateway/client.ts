// Clients of a gateway under test that measure the exact bytes they moved: raw requests over one
// connection, CONNECT tunnels, downloads, over TCP or a TLS session to the proxy.
import { execFile } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';

/**
 * One GET of `url` by curl with `proxyArgs` (`--proxy socks5h://user:pass@host:port`, or
 * `--proxy http://host:port --proxy-user user:pass`), as a customer runs it: the HTTP status curl
 * got ('000': none; a proxy's refusal is its status, 407 or 504).
 */
export function curlStatus(url: string, proxyArgs: string[]): Promise<string> {
  const args = ['--silent', '--max-time', '20', ...proxyArgs, '-o', '/dev/null', '-w', '%{http_code}', url];
  return new Promise((resolve) => execFile('curl', args, (_err, stdout) => resolve(stdout)));
}

export const basicAuth = (user: string, pass: string) =>
  `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

export interface Exchange {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/**
 * Connects to the proxy; with `tls`, opens a TLS session to it over the TCP socket (docs/adr/0071).
 * `socket` speaks to the proxy (the TLS session, or the TCP socket), `tcp` counts what crossed the
 * network.
 */
export async function connectToProxy(
  proxyPort: number,
  options: { sourceAddress?: string; tls?: tls.ConnectionOptions } = {},
): Promise<{ socket: net.Socket; tcp: net.Socket }> {
  const tcp = net.connect({
    port: proxyPort,
    host: '127.0.0.1',
    ...(options.sourceAddress ? { localAddress: options.sourceAddress } : {}),
  });
  tcp.on('error', () => undefined);
  await new Promise<void>((r, j) => {
    tcp.once('connect', () => r());
    tcp.once('error', j);
  });
  if (!options.tls) return { socket: tcp, tcp };
  const session = tls.connect({ ...options.tls, socket: tcp });
  session.on('error', () => undefined);
  await new Promise<void>((r, j) => {
    session.once('secureConnect', () => r());
    session.once('error', j);
  });
  return { socket: session, tcp };
}

/**
 * Sends raw requests over ONE connection to the proxy and reads the answers; returns them with
 * the exact bytes the client wrote and read on that connection. With `tls`, over a TLS session
 * (the counts are the TCP socket's, TLS records included), ended with close_notify both ways so
 * that both sides saw every record.
 */
export async function rawExchange(
  proxyPort: number,
  requests: string[],
  options: { sourceAddress?: string; tls?: tls.ConnectionOptions } = {},
): Promise<{ responses: Exchange[]; written: number; read: number }> {
  const { socket, tcp } = await connectToProxy(proxyPort, options);
  const responses: Exchange[] = [];
  let buffer = Buffer.alloc(0);
  const waitFor = async (pred: () => boolean) => {
    while (!pred()) {
      if (socket.destroyed && !socket.readableLength)
        throw new Error(`connection closed; got ${buffer.toString('latin1').slice(0, 200)}`);
      await new Promise<void>((r) => {
        const done = () => {
          socket.off('data', onData);
          socket.off('close', done);
          r();
        };
        const onData = (chunk: Buffer) => {
          buffer = Buffer.concat([buffer, chunk]);
          done();
        };
        socket.on('data', onData);
        socket.on('close', done);
      });
    }
  };
  for (const request of requests) {
    socket.write(request);
    await waitFor(() => buffer.indexOf('\r\n\r\n') >= 0);
    const end = buffer.indexOf('\r\n\r\n');
    const head = buffer.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(head[0]!.split(' ')[1]);
    const headers: http.IncomingHttpHeaders = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
    }
    buffer = buffer.subarray(end + 4);
    let body: Buffer;
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      await waitFor(() => buffer.length >= n || socket.destroyed);
      body = buffer.subarray(0, n);
      buffer = buffer.subarray(n);
    } else if (headers['transfer-encoding'] === 'chunked') {
      await waitFor(() => buffer.indexOf('0\r\n\r\n') >= 0);
      body = dechunk(buffer.subarray(0, buffer.indexOf('0\r\n\r\n') + 5));
      buffer = buffer.subarray(buffer.indexOf('0\r\n\r\n') + 5);
    } else {
      body = Buffer.alloc(0);
    }
    responses.push({ status, headers, body });
    if (headers.connection === 'close') break;
  }
  await new Promise((r) => setImmediate(r));
  if (options.tls) {
    if (!tcp.destroyed) {
      socket.end();
      await new Promise((r) => tcp.once('close', r));
    }
    return { responses, written: tcp.bytesWritten, read: tcp.bytesRead };
  }
  const result = { responses, written: socket.bytesWritten, read: socket.bytesRead };
  socket.destroy();
  await new Promise((r) => setTimeout(r, 20));
  return result;
}

function dechunk(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let i = 0;
  while (i < data.length) {
    const eol = data.indexOf('\r\n', i);
    const size = parseInt(data.subarray(i, eol).toString('latin1'), 16);
    if (!size) break;
    out.push(data.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

export const get = (url: string, auth?: string, extra = '') =>
  `GET ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}${extra}\r\n`;

/**
 * Opens a CONNECT tunnel; resolves with the socket after the 200, or the refusal status. With
 * `tls`, inside a TLS session to the proxy; `tcp` is the TCP socket under it (what crossed the
 * network).
 */
export async function openTunnel(
  proxyPort: number,
  authority: string,
  auth?: string,
  options: { tls?: tls.ConnectionOptions } = {},
): Promise<{ status: number; socket: net.Socket; tcp: net.Socket; headers: string; leftover: Buffer }> {
  const { socket, tcp } = options.tls
    ? await connectToProxy(proxyPort, options)
    : (() => {
        const plain = net.connect({ port: proxyPort, host: '127.0.0.1' });
        plain.on('error', () => undefined);
        return { socket: plain, tcp: plain };
      })();
  socket.write(
    `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`,
  );
  let buffer = Buffer.alloc(0);
  await new Promise<void>((resolve) => {
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (buffer.indexOf('\r\n\r\n') >= 0) {
        socket.off('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('close', () => resolve());
  });
  const end = buffer.indexOf('\r\n\r\n');
  const headers = buffer.subarray(0, Math.max(0, end)).toString('latin1');
  return {
    status: Number(headers.split(' ')[1] ?? 0),
    socket,
    tcp,
    headers,
    leftover: buffer.subarray(end + 4),
  };
}

/**
 * One download of `bytes` from the origin through a gateway on a fresh connection: its status, or
 * -1 when the answer was cut short or never came.
 */
export function download(
  proxyPort: number,
  originPort: number,
  auth: string,
  bytes: number,
): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1',
      port: proxyPort,
      path: `http://127.0.0.1:${originPort}/bytes/${bytes}`,
      headers: { 'proxy-authorization': auth },
      agent: false,
    });
    req.on('response', (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => (n += c.length));
      res.on('end', () => resolve(res.statusCode === 200 && n < bytes ? -1 : (res.statusCode ?? -1)));
      res.on('error', () => resolve(-1));
      res.on('aborted', () => resolve(-1));
    });
    req.on('error', () => resolve(-1));
    req.end();
  });
}
