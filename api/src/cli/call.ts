// One admin CLI command's call of /admin/v1 (main.ts parses the command line and hands it over):
// the token from --token, the environment or npm start's admin-token file; the answer printed
// (JSON pretty, CSV as it came); exit 1 with the API's message, or with what to check when the
// API cannot be reached.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { apiUrl, loadCliConfig } from './config.ts';
import { UsageError, type Command } from './command.ts';

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  fetch: typeof fetch;
  env?: Record<string, string | undefined>;
}

/** Sends `request` with the global options `--url` and `--token`; returns the exit code. */
export async function callAdminApi(
  request: ReturnType<Command['request']>,
  global: { url?: string | undefined; token?: string | undefined },
  io: CliIo,
): Promise<number> {
  const config = loadCliConfig(io.env);
  const token =
    global.token ??
    config.PROXYFLEET_ADMIN_TOKEN ??
    (await readFile(path.join(config.PROXYFLEET_DATA_DIR, 'admin-token'), 'utf8').then(
      (t) => t.trim(),
      () => undefined,
    ));
  if (!token) throw new UsageError('no admin token: pass --token or set PROXYFLEET_ADMIN_TOKEN');
  const base = (global.url ?? apiUrl(config)).replace(/\/+$/, '');
  let res: Response;
  try {
    res = await io.fetch(`${base}/admin/v1${request.path}`, {
      method: request.method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(request.body ? { 'content-type': 'application/json' } : {}),
      },
      ...(request.body ? { body: JSON.stringify(request.body) } : {}),
    });
  } catch (err) {
    // fetch says only "fetch failed"; the reason (ECONNREFUSED, ENOTFOUND, ...) is its cause.
    const cause = err instanceof Error && err.cause instanceof Error ? err.cause : undefined;
    const reason =
      (cause && 'code' in cause ? String(cause.code) : undefined) ?? cause?.message ?? String(err);
    io.err(
      `error: cannot reach the admin API at ${base} (${reason}).\n` +
        'Is `npm start` (or the API) running? Point the CLI at it with --url or PROXYFLEET_API_URL, ' +
        'or PROXYFLEET_API_HOST and PROXYFLEET_API_PORT as npm start reads them.\n',
    );
    return 1;
  }
  const text = await res.text();
  if (!res.ok) {
    let message = text;
    try {
      message = (JSON.parse(text) as { error?: string }).error ?? text;
    } catch {
      // not JSON
    }
    io.err(`error ${res.status}: ${message}\n`);
    return 1;
  }
  // A CSV export is printed as it came; JSON is pretty-printed.
  if (!text) io.out('done\n');
  else if (res.headers.get('content-type')?.startsWith('application/json'))
    io.out(`${JSON.stringify(JSON.parse(text), null, 2)}\n`);
  else io.out(text);
  return 0;
}
