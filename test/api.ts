// Test harness: an API on port 0 over a test database, in this process or as a child process
// (`node api/src/main.ts`), the way production runs it.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pino from 'pino';
import { Health } from '#common/health.ts';
import { createLogger } from '#common/logger.ts';
import { createRegistry } from '#common/metrics.ts';
import type { Pool } from '#common/db/pool.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { jestHooks } from './hooks.ts';
import { TEST_ADMIN_TOKEN, TEST_CREDENTIALS_KEY } from './fixtures.ts';
import { loadApiConfig } from '#api/config.ts';
import { startApi, type RunningApi } from '#api/server.ts';

export interface TestApi {
  url: string;
  api: RunningApi;
  close(): Promise<void>;
}

export function testEnv(databaseUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    PROXYFLEET_API_HOST: '127.0.0.1',
    PROXYFLEET_API_PORT: '0',
    PROXYFLEET_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    PROXYFLEET_CREDENTIALS_KEY: TEST_CREDENTIALS_KEY.toString('hex'),
    PROXYFLEET_LOG_LEVEL: 'silent',
    ...overrides,
  };
}

export async function startTestApi(
  db: { url: string; pool: Pool },
  options: {
    env?: Record<string, string>;
    logStream?: pino.DestinationStream;
    logLevel?: pino.LevelWithSilent;
  } = {},
): Promise<TestApi> {
  const config = loadApiConfig(testEnv(db.url, options.env));
  const logger = createLogger('api', options.logLevel ?? 'silent', options.logStream);
  const registry = createRegistry('api', false);
  const health = new Health([registry]);
  const api = await startApi({ config, logger, registry, health, pool: db.pool, databaseUrl: db.url });
  return { url: `http://127.0.0.1:${api.port}`, api, close: () => api.close() };
}

const MAIN = fileURLToPath(new URL('../api/src/main.ts', import.meta.url));

export interface ChildApi {
  url: string;
  child: ChildProcess;
  close(): Promise<void>;
}

/** Starts `node api/src/main.ts` with the test environment and waits for "api listening". */
export async function spawnApi(
  databaseUrl: string,
  overrides: Record<string, string> = {},
): Promise<ChildApi> {
  const child = spawn(process.execPath, [MAIN], {
    env: testEnv(databaseUrl, { PROXYFLEET_LOG_LEVEL: 'info', ...overrides }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    const fail = (err: Error) => {
      if (child.exitCode === null) child.kill('SIGKILL');
      reject(err);
    };
    let buffered = '';
    let stderr = '';
    const timer = setTimeout(() => fail(new Error(`api child did not start: ${stderr}`)), 20_000);
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        try {
          const entry = JSON.parse(line) as { msg?: string; port?: number };
          if (entry.msg === 'api listening' && entry.port) {
            clearTimeout(timer);
            resolve(entry.port);
          }
        } catch {
          // not a log line
        }
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`api child exited with ${code}: ${stderr}`));
    });
  });
  child.stdout.resume();
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    async close() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

export interface CallOptions {
  method?: string;
  /** Customer key, sent as X-API-Key (or as a bearer token with `bearer: true`). */
  key?: string;
  bearer?: boolean;
  /** Admin token: Authorization: Bearer. */
  admin?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  headers: Headers;
  body: any;
}

export async function call(baseUrl: string, path: string, options: CallOptions = {}): Promise<CallResult> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) {
    if (options.bearer) headers.authorization = `Bearer ${options.key}`;
    else headers['x-api-key'] = options.key;
  }
  if (options.admin !== undefined) headers.authorization = `Bearer ${options.admin}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(baseUrl + path, {
    method: options.method ?? (body ? 'POST' : 'GET'),
    headers,
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

interface RouterLayer {
  name: string;
  rawPath?: unknown;
  route?: { path: unknown; methods: Record<string, boolean> };
  handle: { stack?: RouterLayer[] };
}

/**
 * Every route the application mounts, as "METHOD /prefix/path", read from Express's own router
 * (so a route added anywhere is in the list without anyone remembering to add it).
 */
export function mountedRoutes(app: RunningApi['app']): string[] {
  const routes: string[] = [];
  const walk = (stack: RouterLayer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route && typeof layer.route.path === 'string') {
        for (const [method, on] of Object.entries(layer.route.methods)) {
          if (on && method !== '_all') routes.push(`${method.toUpperCase()} ${prefix}${layer.route.path}`);
        }
      } else if (layer.name === 'router' && layer.handle.stack) {
        walk(layer.handle.stack, prefix + (typeof layer.rawPath === 'string' ? layer.rawPath : ''));
      }
    }
  };
  walk((app as unknown as { router: { stack: RouterLayer[] } }).router.stack, '');
  return routes;
}

// jest hooks for API integration tests: a test database and an API on it for the whole file.
export interface ApiFixture {
  db: TestDatabase;
  api: TestApi;
}

/** Starts both before the file's tests and stops them after; read the fields inside tests. */
export function useTestApi(options: Parameters<typeof startTestApi>[1] = {}): ApiFixture {
  const fixture = {} as ApiFixture;
  jestHooks().beforeAll(async () => {
    fixture.db = await createTestDatabase();
    fixture.api = await startTestApi(fixture.db, options);
  });
  jestHooks().afterAll(async () => {
    await fixture.api?.close();
    await fixture.db?.drop();
  });
  return fixture;
}

/** A call to /admin/v1 with the admin token, on the fixture's API. */
export const adminOf =
  (fx: ApiFixture) =>
  (path: string, options: CallOptions = {}): Promise<CallResult> =>
    call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });

/** A new account created through the admin API: its id, email and primary API key. */
export async function newAccountVia(
  fx: ApiFixture,
  email: string,
): Promise<{ id: string; email: string; apiKey: string }> {
  const res = await adminOf(fx)('/accounts', { body: { email } });
  if (res.status !== 201) throw new Error(`account not created: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; email: string; apiKey: string };
}
