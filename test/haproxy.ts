// HAProxy in TCP mode in front of gateways, as a cloud load balancer or an ingress is: one
// frontend per route, each sending its backend a PROXY header of the version asked (or none), from
// a chosen source address (HAProxy's own, the one a gateway would trust). /usr/sbin/haproxy is a
// test dependency (loadtest/run/preflight.ts checks it too).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './ports.ts';
import { listening, until } from './process.ts';

export interface HaproxyRoute {
  /** The gateway's port on 127.0.0.1. */
  backendPort: number;
  /** The PROXY header HAProxy sends: 1 (`send-proxy`), 2 (`send-proxy-v2`) or none. */
  proxy: 1 | 2 | undefined;
}

export interface Haproxy {
  /** The port of each route's frontend on 127.0.0.1, in the order of the routes. */
  ports: number[];
  stop(): Promise<void>;
}

/** Starts HAProxy with one TCP frontend per route; its connections to gateways leave from `source`. */
export async function startHaproxy(routes: HaproxyRoute[], source: string): Promise<Haproxy> {
  const dir = await mkdtemp(path.join(tmpdir(), 'haproxy-'));
  const ports = await Promise.all(routes.map(() => freePort()));
  const sections = routes.map((r, i) => {
    const send = r.proxy === 1 ? ' send-proxy' : r.proxy === 2 ? ' send-proxy-v2' : '';
    return `frontend f${i}
    bind 127.0.0.1:${ports[i]}
    default_backend b${i}
backend b${i}
    server gateway 127.0.0.1:${r.backendPort} source ${source}${send}`;
  });
  const config = `global
    maxconn 1024
defaults
    mode tcp
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 60s
${sections.join('\n')}
`;
  const file = path.join(dir, 'haproxy.cfg');
  await writeFile(file, config);
  const child: ChildProcess = spawn('/usr/sbin/haproxy', ['-db', '-f', file], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    await until(async () => {
      if (child.exitCode !== null) throw new Error(`haproxy exited: ${stderr}`);
      return (await Promise.all(ports.map(listening))).every(Boolean);
    }, 'haproxy listening');
  } catch (err) {
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    ports,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
