// Support for the e2e project: the one-node cluster of `npm run cluster` (scripts/cluster.sh), the
// image of `npm run image`, kubectl and helm against it, an origin on the cluster's bridge address
// (reachable from pods without leaving the machine) and a raw proxy client that counts the bytes
// it moved, as the gateway bills them (docs/adr/0066).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../process.ts';
import { toolsBinDir } from '../kube/env.ts';

const run = promisify(execFile);

/** The cluster's addresses (scripts/cluster.sh): the node's bridge address and PostgreSQL's port. */
export const NODE_IP = '10.213.77.1';
export const CLUSTER_PG_PORT = 15432;
export const VERSION = (
  JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

const env = {
  ...process.env,
  CONTAINERS_CONF: path.join(REPO_ROOT, 'scripts/image/containers.conf'),
  PROXYFLEET_TOOLS_BIN: toolsBinDir(),
};

async function script(args: string[]): Promise<string> {
  const { stdout } = await run('bash', args, { cwd: REPO_ROOT, env, timeout: 900_000, maxBuffer: 64 << 20 });
  return stdout.trim().split('\n').pop() ?? '';
}

/** `npm run image` then `npm run cluster -- up` (both idempotent, seconds when warm): the kubeconfig path. */
export async function clusterUp(): Promise<{ image: string; kubeconfig: string }> {
  const image = await script([path.join(REPO_ROOT, 'scripts/image.sh')]);
  const kubeconfig = await script([path.join(REPO_ROOT, 'scripts/cluster.sh'), 'up']);
  return { image, kubeconfig };
}

export interface Kubectl {
  (args: string[], input?: string): Promise<string>;
  json<T>(args: string[]): Promise<T>;
  helm(args: string[]): Promise<string>;
}

export function kubectlFor(kubeconfig: string): Kubectl {
  const call = (bin: string, args: string[], input?: string) =>
    new Promise<string>((resolve, reject) => {
      const child = execFile(
        path.join(toolsBinDir(), bin),
        [`--kubeconfig=${kubeconfig}`, ...args],
        { maxBuffer: 32 << 20, timeout: 600_000 },
        (err, stdout, stderr) =>
          err
            ? reject(new Error(`${bin} ${args.join(' ')}: ${err.message}\n${stderr}${stdout}`))
            : resolve(stdout),
      );
      child.stdin?.on('error', () => {});
      child.stdin?.end(input ?? '');
    });
  const kubectl = ((args: string[], input?: string) => call('kubectl', args, input)) as Kubectl;
  kubectl.json = async <T>(args: string[]) => JSON.parse(await call('kubectl', [...args, '-o', 'json'])) as T;
  kubectl.helm = (args: string[]) => call('helm', args);
  return kubectl;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns a value other than undefined; fails naming `what` and the last state. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 120_000,
  everyMs = 500,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
      last = 'not yet';
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(last)})`);
    await sleep(everyMs);
  }
}

export interface Pod {
  metadata: { name: string; deletionTimestamp?: string; labels?: Record<string, string> };
  status: {
    podIP?: string;
    phase?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: Array<{ containerID?: string; restartCount: number }>;
  };
}

/** The host pid of a pod's first container (crictl on the cluster's containerd), to kill it like a crash. */
export async function containerPid(pod: Pod): Promise<number> {
  const id = pod.status.containerStatuses?.[0]?.containerID?.replace(/^containerd:\/\//, '');
  if (!id) throw new Error(`pod ${pod.metadata.name} has no container yet`);
  const dir = process.env.PROXYFLEET_CLUSTER_DIR ?? '/var/lib/proxyfleet-cluster';
  const { stdout } = await run(path.join(toolsBinDir(), 'crictl'), [
    '--runtime-endpoint',
    `unix://${dir}/keep/containerd/containerd.sock`,
    'inspect',
    '-o',
    'json',
    id,
  ]);
  return (JSON.parse(stdout) as { info: { pid: number } }).info.pid;
}
export const isReady = (p: Pod) =>
  !p.metadata.deletionTimestamp &&
  !!p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');

export async function pods(kubectl: Kubectl, namespace: string, selector: string): Promise<Pod[]> {
  return (await kubectl.json<{ items: Pod[] }>(['get', 'pods', '-n', namespace, '-l', selector])).items;
}

/** Waits until exactly `count` pods match, all Ready, none terminating. */
export async function readyPods(
  kubectl: Kubectl,
  namespace: string,
  selector: string,
  count: number,
  timeoutMs = 180_000,
): Promise<Pod[]> {
  return eventually(
    `${count} Ready pods ${selector}`,
    async () => {
      const list = await pods(kubectl, namespace, selector);
      return list.length === count && list.every(isReady) ? list : undefined;
    },
    timeoutMs,
  );
}

/**
 * An origin on the node's bridge address: /bytes/<n> answers n bytes; /slow/<n> streams them 64 KiB
 * every 20 ms; /ip answers the address the connection came from (a gateway's exit address).
 */
export interface Origin {
  url: string;
  /**
   * Remote addresses (gateway pod IPs) of the /slow answers in progress: the pod serving a
   * transfer (idle keep-alive connections of the gateways' upstream pools are not counted).
   */
  slowPeers(): string[];
  close(): Promise<void>;
}

/** True once a TCP connection to 127.0.0.1:`port` is accepted (undefined otherwise, for `eventually`). */
export function accepts(port: number): Promise<true | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setTimeout(2_000, () => socket.destroy());
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(undefined));
    socket.on('close', () => resolve(undefined));
  });
}

export async function startOrigin(): Promise<Origin> {
  const open = new Set<net.Socket>();
  const slow = new Set<string>();
  const server = http.createServer((req, res) => {
    if (req.url === '/ip') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(req.socket.remoteAddress ?? '');
      return;
    }
    const [, kind, n] = /^\/(bytes|slow)\/(\d+)$/.exec(req.url ?? '') ?? [];
    if (!kind) {
      res.writeHead(404).end();
      return;
    }
    const total = Number(n);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
    if (kind === 'bytes') {
      res.end(Buffer.alloc(total, 120));
      return;
    }
    const peer = req.socket.remoteAddress ?? '';
    slow.add(peer);
    let sent = 0;
    const timer = setInterval(() => {
      const size = Math.min(65_536, total - sent);
      sent += size;
      res.write(Buffer.alloc(size, 121));
      if (sent >= total) {
        clearInterval(timer);
        res.end();
      }
    }, 20);
    res.on('close', () => {
      clearInterval(timer);
      slow.delete(peer);
    });
  });
  server.on('connection', (s) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, NODE_IP, resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://${NODE_IP}:${port}`,
    slowPeers: () => [...slow],
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface ProxyResult {
  status: number;
  /** TCP payload bytes both ways on the client's socket: what the gateway bills. */
  bytes: number;
  error?: string;
  /** A refusal's Proxy-Status header (RFC 9209): the gateway's reason. */
  proxyStatus?: string;
}

/**
 * One plain-HTTP request through a gateway (on a fresh connection, Connection: close): `proxy` is
 * its NodePort on 127.0.0.1, or one pod's address (the node reaches its pods on the bridge);
 * `onBytes` sees the running total of bytes moved.
 */
export function proxyRequest(
  proxy: number | { host: string; port: number },
  credentials: string,
  target: string,
  onBytes?: (bytes: number) => void,
  timeoutMs = 30_000,
): Promise<ProxyResult> {
  return new Promise((resolve) => {
    const socket =
      typeof proxy === 'number' ? net.connect(proxy, '127.0.0.1') : net.connect(proxy.port, proxy.host);
    let head = '';
    let error: string | undefined;
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error('timed out')));
    socket.on('connect', () =>
      socket.write(
        `GET ${target} HTTP/1.1\r\nHost: ${new URL(target).host}\r\n` +
          `Proxy-Authorization: Basic ${Buffer.from(credentials).toString('base64')}\r\nConnection: close\r\n\r\n`,
      ),
    );
    socket.on('data', (c: Buffer) => {
      // The status line and, on a refusal, its Proxy-Status (which says why).
      if (head.length < 1024) head += c.toString('latin1', 0, 1024);
      onBytes?.(socket.bytesRead + socket.bytesWritten);
    });
    socket.on('error', (err) => (error = err.message));
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      const proxyStatus = status === 200 ? undefined : /\r\nProxy-Status: ([^\r]*)/i.exec(head)?.[1];
      resolve({
        status,
        bytes: socket.bytesRead + socket.bytesWritten,
        ...(error ? { error } : {}),
        ...(proxyStatus ? { proxyStatus } : {}),
      });
    });
  });
}

/** A caller of the API's admin routes with `token`, at the URL `baseUrl()` gives when called: the JSON answer, or an error naming the route and status. */
export function adminApi(
  baseUrl: () => string,
  token: string,
): (method: string, route: string, body?: unknown) => Promise<unknown> {
  return async (method, route, body) => {
    const res = await fetch(`${baseUrl()}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as unknown) : undefined;
  };
}
