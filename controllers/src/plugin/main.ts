// kubectl-proxyfleet: the kubectl plugin (kubectl runs any `kubectl-<name>` on PATH as
// `kubectl <name>`). Parses the command line, runs one command, and turns every failure into one
// line on stderr and an exit code: 0 done, 1 failed, 2 wrong usage.
import { parseArgs } from 'node:util';
import type { PluginContext } from './context.ts';
import { PluginError } from './errors.ts';

export const HELP = `kubectl proxyfleet: the proxyfleet operator's view of a cluster

Usage:
  kubectl proxyfleet status [-n NAMESPACE] [-o json]
      Every ProxyGateway (all namespaces unless -n): its pods ready/desired, exits, endpoint,
      TLS certificate expiry, the namespace's ApiKeys every cache has caught up with, its Ready
      condition and whether it is paused; then every ApiKey.
  kubectl proxyfleet usage ACCOUNT [--api-service NAMESPACE/NAME] [-o json]
      ACCOUNT's bandwidth per product (bought, used, remaining GB), read from the API through
      the API server's Service proxy with a key of a ready ApiKey of the account.
  kubectl proxyfleet rotate-key APIKEY [-n NAMESPACE] [--no-wait] [--timeout 60s]
      Issue APIKEY a new key (spec.rotation + 1) and wait until its Secret holds it.

Options:
  -n, --namespace NAME   the namespace (default: the kubeconfig context's, else default)
  -o, --output FORMAT    table (default) or json
  --kubeconfig FILE      the kubeconfig (default: KUBECONFIG, else ~/.kube/config)
  --context NAME         a context of the kubeconfig other than the current one
  -h, --help             this help
`;

const OPTIONS = {
  namespace: { type: 'string', short: 'n' },
  output: { type: 'string', short: 'o' },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  'api-service': { type: 'string' },
  'no-wait': { type: 'boolean' },
  timeout: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** Runs the plugin with these arguments; resolves to the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  try {
    await dispatch(argv, io);
    return 0;
  } catch (err) {
    if (err instanceof PluginError) {
      io.err(`error: ${err.message}\n`);
      if (err.exitCode === 2) io.err('See kubectl proxyfleet --help.\n');
      return err.exitCode;
    }
    io.err(`error: ${(err as Error).stack ?? String(err)}\n`);
    return 1;
  }
}

async function dispatch(argv: string[], io: Io): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new PluginError((err as Error).message.replace(/\. To specify a positional.*$/s, ''), 2);
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    io.out(HELP);
    return;
  }
  const argument = (what: string): string => {
    if (rest.length !== 1)
      throw new PluginError(
        `${command} takes one ${what}${rest.length > 1 ? `, not ${rest.length}` : ''}`,
        2,
      );
    return rest[0]!;
  };
  // Loaded once the command line is known to be right: the client costs most of the start-up.
  const ctx = async (): Promise<PluginContext> =>
    (await import('./context.ts')).pluginContext({ ...values, out: io.out });
  switch (command) {
    case 'status': {
      if (rest.length > 0) throw new PluginError(`status takes no arguments (got ${rest.join(' ')})`, 2);
      const { status } = await import('./status.ts');
      return status(await ctx());
    }
    case 'usage': {
      const account = argument('ACCOUNT (an account id)');
      const { usage } = await import('./usage.ts');
      return usage(await ctx(), account, { apiService: values['api-service'] });
    }
    case 'rotate-key': {
      const name = argument('APIKEY (an ApiKey name)');
      const timeoutMs = duration(values.timeout ?? '60s');
      const { rotateKey } = await import('./rotate.ts');
      return rotateKey(await ctx(), name, { wait: !values['no-wait'], timeoutMs });
    }
    default:
      throw new PluginError(`unknown command "${command}": expected status, usage or rotate-key`, 2);
  }
}

/** "90s", "2m", "500ms" or plain seconds, in milliseconds. */
function duration(text: string): number {
  const m = /^(\d+)(ms|s|m)?$/.exec(text);
  if (!m) throw new PluginError(`--timeout ${text}: expected a duration such as 60s or 2m`, 2);
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 'm' ? n * 60_000 : n * 1000;
}
