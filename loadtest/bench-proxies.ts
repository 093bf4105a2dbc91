// Other proxies as further rows of `npm run bench:gateway`: squid and tinyproxy (Debian packages),
// each started on a free port from a generated minimal configuration (no authentication, no
// cache, no logs) in the bench's temporary directory. A proxy that is not installed is skipped.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import { freePort } from '#test/ports.ts';
import path from 'node:path';

export const SQUID = '/usr/sbin/squid';
export const TINYPROXY = '/usr/bin/tinyproxy';

export interface ExternalProxy {
  port: number;
  pid: number | undefined;
  stop(): Promise<void>;
}

/** Resolves once something accepts connections on the port (polled), or rejects after 10 s. */
async function listening(port: number, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${output().slice(-2000)}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ port, host: '127.0.0.1' });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`not listening on ${port} after 10 s: ${output().slice(-2000)}`);
}

async function run(command: string, args: string[], port: number): Promise<ExternalProxy> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-10_000)));
  child.stderr.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-10_000)));
  await listening(port, child, () => out);
  return {
    port,
    pid: child.pid,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
      }),
  };
}

/**
 * squid in the foreground as a single process (-N: no kids, so its pid is the worker whose CPU
 * and memory are measured), every request allowed, nothing cached or logged. With `tls`, an
 * `https_port` instead (squid-openssl: a forward proxy that clients reach over TLS).
 */
export async function startSquid(
  dir: string,
  tls?: { certFile: string; keyFile: string },
): Promise<ExternalProxy> {
  const port = await freePort();
  const conf = path.join(dir, `squid-${port}.conf`);
  await writeFile(
    conf,
    [
      tls
        ? `https_port 127.0.0.1:${port} tls-cert=${tls.certFile} tls-key=${tls.keyFile}`
        : `http_port 127.0.0.1:${port}`,
      'http_access allow all',
      'cache deny all',
      'cache_mem 0 MB',
      'access_log none',
      'cache_store_log none',
      'cache_log /dev/null',
      'pid_filename none',
      'visible_hostname bench',
      // Two descriptors per tunnel: the idle phase holds 6,000 tunnels.
      'max_filedescriptors 20000',
      'via off',
      'forwarded_for delete',
      'shutdown_lifetime 0 seconds',
      '',
    ].join('\n'),
  );
  return run(SQUID, ['-N', '-f', conf], port);
}

/** tinyproxy in the foreground (-d), every client and port allowed, logging only critical errors. */
export async function startTinyproxy(dir: string): Promise<ExternalProxy> {
  const port = await freePort();
  const conf = path.join(dir, `tinyproxy-${port}.conf`);
  const lines = [`Port ${port}`, 'Listen 127.0.0.1', 'Timeout 600', 'MaxClients 10000', 'LogLevel Critical'];
  // As root tinyproxy wants an unprivileged user to switch to.
  if (process.getuid?.() === 0) lines.push('User nobody', 'Group nogroup');
  await writeFile(conf, `${lines.join('\n')}\n`);
  return run(TINYPROXY, ['-d', '-c', conf], port);
}

export const installed = (binary: string) => existsSync(binary);
