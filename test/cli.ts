// The admin CLI run in-process (api/src/cli/main.ts's runCli) with its output captured, against a
// test API (`useCli`) or any environment (`runCapturedCli`).
import { runCli } from '#api/cli/main.ts';
import { useTestApi } from './api.ts';
import { TEST_ADMIN_TOKEN } from './fixtures.ts';

export interface CliResult {
  code: number;
  out: string;
  err: string;
}

export async function runCapturedCli(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<CliResult> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { out: (t) => (out += t), err: (t) => (err += t), fetch, env });
  return { code, out, err };
}

/** A test API (useTestApi) and `cli(...argv)` running the admin CLI against it with the admin token. */
export function useCli() {
  const fx = useTestApi();
  const cli = (...argv: string[]) =>
    runCapturedCli(argv, { PROXYFLEET_API_URL: fx.api.url, PROXYFLEET_ADMIN_TOKEN: TEST_ADMIN_TOKEN });
  return { fx, cli };
}
