// Runs an entrypoint as a real child process on this Node (24), collects its JSON log lines,
// and waits for log messages or exit. Used by the entrypoint and multi-process tests.
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface RunningProcess {
  child: ChildProcess;
  /** Every stdout/stderr line so far. */
  lines: string[];
  /** Resolves with the first parsed JSON log line whose msg matches. */
  waitForLog(msg: string | RegExp, timeoutMs?: number): Promise<Record<string, unknown>>;
  /**
   * Resolves with the exit code (or signal name) once the process has exited and its output has
   * been read to the end (every line is in `lines`).
   */
  exited: Promise<number | string>;
  kill(signal?: NodeJS.Signals): void;
}

export function startEntrypoint(script: string, env: Record<string, string | undefined>): RunningProcess {
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', path.join(REPO_ROOT, script)],
    {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, PROXYFLEET_LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const lines: string[] = [];
  const waiters: Array<{ match: (line: string) => boolean; resolve: (line: string) => void }> = [];
  const onData = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line) continue;
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.match(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  // 'close', not 'exit': 'exit' can come before the last of stdout and stderr has been read, and a
  // waitForLog() after `exited` would then miss a line the process did write.
  const exited = new Promise<number | string>((resolve) =>
    child.on('close', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  return {
    child,
    lines,
    exited,
    kill: (signal = 'SIGTERM') => void child.kill(signal),
    waitForLog(msg, timeoutMs = 20_000) {
      const test = (line: string) => {
        try {
          const parsed = JSON.parse(line) as { msg?: string };
          return (
            typeof parsed.msg === 'string' &&
            (typeof msg === 'string' ? parsed.msg === msg : msg.test(parsed.msg))
          );
        } catch {
          return false;
        }
      };
      const seen = lines.find(test);
      if (seen) return Promise.resolve(JSON.parse(seen) as Record<string, unknown>);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(new Error(`no log "${String(msg)}" within ${timeoutMs} ms; output:\n${lines.join('\n')}`)),
          timeoutMs,
        );
        waiters.push({
          match: test,
          resolve: (line) => {
            clearTimeout(timer);
            resolve(JSON.parse(line) as Record<string, unknown>);
          },
        });
        void exited.then(() => {
          clearTimeout(timer);
          reject(new Error(`process exited before logging "${String(msg)}"; output:\n${lines.join('\n')}`));
        });
      });
    },
  };
}

/** Ends a process that a test started, whatever state it is in. */
export async function stopProcess(p: RunningProcess | undefined): Promise<void> {
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.kill('SIGTERM');
  const timer = setTimeout(() => p.kill('SIGKILL'), 15_000);
  await p.exited;
  clearTimeout(timer);
}

/** Polls a URL until it answers `status` (default 200); returns the last response body. */
export async function waitForHttp(url: string, status = 200, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      const body = await res.text();
      if (res.status === status) return body;
      last = `${res.status} ${body}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer ${status} within ${timeoutMs} ms (last: ${last})`);
}

/** Polls `check` until it holds; fails naming `what` after `timeoutMs`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Whether a process with this id exists (signal 0). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Whether something accepts TCP connections on this port of 127.0.0.1. */
export const listening = (port: number): Promise<boolean> =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
