// stripe-mock (github.com/stripe/stripe-mock, built by scripts/install-tools.sh): Stripe's API
// answered from its OpenAPI fixtures, stateless. Tests start one per file (test/stripe.ts) and
// `npm start` starts one when the tool is built and no PROXYFLEET_STRIPE_SECRET_KEY is set.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** The binary scripts/install-tools.sh built in its bin dir, or null. */
export function stripeMockBinary(binDir: string): string | null {
  const file = path.join(binDir, 'stripe-mock');
  return existsSync(file) ? file : null;
}

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'];

export interface StripeMock {
  /** http://127.0.0.1:<port> */
  url: string;
  close(): Promise<void>;
}

/** Starts it on ephemeral ports (HTTP and HTTPS: its HTTPS default port is fixed) and waits until it listens. */
export async function startStripeMock(binary: string, timeoutMs = 60_000): Promise<StripeMock> {
  const flags = ['-http-addr', '127.0.0.1:', '-https-addr', '127.0.0.1:'];
  // It dies with its parent: `npm start` killed with SIGKILL (or a killed test worker) left it
  // running, orphaned, forever. Linux's parent-death signal, set by util-linux's setpriv (which
  // then execs it), where there is one; elsewhere it is stopped by close() only.
  const setpriv = SETPRIV.find((f) => existsSync(f));
  const child = setpriv
    ? spawn(setpriv, ['--pdeathsig', 'SIGTERM', '--', binary, ...flags], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : spawn(binary, flags, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`stripe-mock did not listen within ${timeoutMs} ms: ${out}`));
    }, timeoutMs);
    const read = (d: Buffer) => {
      out += d.toString();
      const m = /Listening for HTTP at address: (\S+):(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(`http://127.0.0.1:${m[2]}`);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`stripe-mock exited (${code}): ${out}`));
    });
  });
  return {
    url,
    async close() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
