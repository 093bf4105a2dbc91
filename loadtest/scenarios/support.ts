// What a load-test scenario needs around the fleet: the admin API, a k6 run with its summary,
// a probe through one gateway process, the verdicts and the results directory. (loadtest/run.ts
// has its own copies from before scenarios had files; the split of run.ts can take these.)
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { REPO_ROOT, type Fleet } from '../fleet/fleet.ts';

export const toolsBin =
  process.env.PROXYFLEET_TOOLS_BIN ?? path.join(os.homedir(), '.cache/proxyfleet/tools/bin');
export const k6Binary = process.env.K6 ?? path.join(toolsBin, 'k6');
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Verdict {
  name: string;
  ok: boolean;
  /** A warning only: reported, but the run still passes. */
  soft?: boolean;
  detail: string;
}

/** A scenario's log, verdicts and figures, written to its results directory at the end. */
export class Report {
  readonly verdicts: Verdict[] = [];
  readonly figures: [string, string][] = [];
  readonly startedAt = Date.now();
  readonly dir: string;
  private readonly title: string;

  constructor(title: string, dir: string) {
    this.title = title;
    this.dir = dir;
  }

  say(line: string): void {
    process.stdout.write(
      `[${this.title} ${((Date.now() - this.startedAt) / 1000).toFixed(1).padStart(6)}s] ${line}\n`,
    );
  }

  judge(name: string, ok: boolean, detail: string, soft = false): void {
    this.verdicts.push({ name, ok, soft, detail });
    this.say(`${ok ? 'PASS' : soft ? 'WARN' : 'FAIL'} ${name}: ${detail}`);
  }

  figure(name: string, value: string | number): void {
    this.figures.push([name, String(value)]);
  }

  get ok(): boolean {
    return this.verdicts.every((v) => v.ok || v.soft);
  }

  /** Writes verdicts.md and verdicts.json; true when every verdict held. */
  async finish(extra: Record<string, unknown> = {}): Promise<boolean> {
    const cell = (s: string) => s.replaceAll('|', '\\|');
    const md = [
      `# ${this.title}`,
      '',
      '| assertion | result | detail |',
      '|---|---|---|',
      ...this.verdicts.map(
        (v) => `| ${v.name} | ${v.ok ? 'PASS' : v.soft ? 'WARN' : 'FAIL'} | ${cell(v.detail)} |`,
      ),
      '',
      '| figure | value |',
      '|---|---|',
      ...this.figures.map(([k, v]) => `| ${k} | ${cell(v)} |`),
      '',
    ].join('\n');
    await writeFile(path.join(this.dir, 'verdicts.md'), md);
    await writeFile(
      path.join(this.dir, 'verdicts.json'),
      JSON.stringify(
        { ok: this.ok, verdicts: this.verdicts, figures: Object.fromEntries(this.figures), ...extra },
        null,
        2,
      ),
    );
    this.say(
      `${this.ok ? 'all assertions held' : 'SOME ASSERTIONS FAILED'}; table in ${path.relative(REPO_ROOT, path.join(this.dir, 'verdicts.md'))}`,
    );
    return this.ok;
  }
}

// --- the admin API ---------------------------------------------------------------------------
export const accountSchema = z.object({
  id: z.string(),
  apiKey: z.string(),
  proxyUsername: z.string(),
  proxyPassword: z.string(),
});
export type Account = z.infer<typeof accountSchema>;

export class AdminApiError extends Error {
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
}

export async function admin(
  fleet: Fleet,
  method: string,
  route: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<unknown> {
  const res = await fetch(`${fleet.apiUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${fleet.adminToken}`, 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  if (!res.ok) throw new AdminApiError(`${method} ${route}: ${res.status} ${text}`, res.status);
  return text ? (JSON.parse(text) as unknown) : undefined;
}

/** A new account with `purchases` (bytes per product). */
export async function customer(
  fleet: Fleet,
  email: string,
  purchases: Record<string, number>,
): Promise<Account> {
  const account = accountSchema.parse(await admin(fleet, 'POST', '/admin/v1/accounts', { email }));
  for (const [product, bytes] of Object.entries(purchases))
    await admin(fleet, 'POST', `/admin/v1/accounts/${account.id}/purchases`, { product, gb: bytes / 1e9 });
  return account;
}

/** One plain GET through one gateway process on a fresh connection: its status and the bytes moved. */
export function gatewayRequest(
  port: number,
  credentials: string,
  target: string,
): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(5000, () => socket.destroy(new Error('gateway probe timed out')));
    socket.on('connect', () =>
      socket.write(
        `GET ${target} HTTP/1.1\r\nHost: ${new URL(target).host}\r\nProxy-Authorization: Basic ${Buffer.from(credentials).toString('base64')}\r\nConnection: close\r\n\r\n`,
      ),
    );
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const head = Buffer.concat(chunks).toString('latin1', 0, 64);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, bytes: socket.bytesWritten + socket.bytesRead });
    });
  });
}

// --- k6 ----------------------------------------------------------------------------------------
const summarySchema = z.object({
  metrics: z.record(
    z.string(),
    z.object({
      values: z.record(z.string(), z.number()),
      thresholds: z.record(z.string(), z.object({ ok: z.boolean() })).optional(),
    }),
  ),
});
export type Summary = z.infer<typeof summarySchema>;
/** One value of a k6 metric in a summary (0 when absent). */
export const metric = (s: Summary | undefined, name: string, value = 'count') =>
  s?.metrics[name]?.values[value] ?? 0;

/** Runs one k6 script (loadtest/k6/<script>); its summary and log go to `dir` as k6-<name>.*. */
export function runK6(
  script: string,
  env: Record<string, string>,
  name: string,
  dir: string,
): Promise<{ code: number; summary: Summary | undefined }> {
  const summaryPath = path.join(dir, `k6-${name}.json`);
  return new Promise((resolve, reject) => {
    const child = spawn(
      k6Binary,
      ['run', '--quiet', '--no-color', path.join(REPO_ROOT, 'loadtest/k6', script)],
      {
        cwd: REPO_ROOT,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          K6_NO_USAGE_REPORT: 'true',
          SUMMARY: summaryPath,
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const out: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => out.push(c));
    child.on('error', reject);
    child.on('exit', (code) => {
      void (async () => {
        await writeFile(path.join(dir, `k6-${name}.log`), Buffer.concat(out));
        const summary = existsSync(summaryPath)
          ? summarySchema.parse(JSON.parse(await readFile(summaryPath, 'utf8')))
          : undefined;
        resolve({ code: code ?? -1, summary });
      })().catch(reject);
    });
  });
}
