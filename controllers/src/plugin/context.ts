// What every plugin command shares: the kubeconfig (kubectl's --kubeconfig, --context and
// KUBECONFIG, as kubectl reads them: kubectl passes a plugin its arguments, not its settings),
// the namespace to act in, how to print, and errors a person can act on.
import { KubeConfig } from '@kubernetes/client-node';
import { createKubeClient, KubeApiError, type KubeClient, type Resource } from '../runtime/kube.ts';
import { PluginError } from './errors.ts';

export { PluginError };

export interface PluginContext {
  client: KubeClient;
  /** -n, else the kubeconfig context's namespace, else default. */
  namespace: string;
  /** -n was given (status: one namespace instead of all). */
  namespaceGiven: boolean;
  output: 'table' | 'json';
  out: (text: string) => void;
  /** The API server's address, for error messages. */
  server: string;
}

export function pluginContext(o: {
  kubeconfig?: string;
  context?: string;
  namespace?: string;
  output?: string;
  out: (text: string) => void;
}): PluginContext {
  const kc = new KubeConfig();
  try {
    if (o.kubeconfig) kc.loadFromFile(o.kubeconfig);
    else kc.loadFromDefault();
  } catch (err) {
    throw new PluginError(
      `cannot read the kubeconfig${o.kubeconfig ? ` ${o.kubeconfig}` : ''}: ${(err as Error).message}`,
    );
  }
  if (o.context) {
    if (!kc.getContexts().some((c) => c.name === o.context))
      throw new PluginError(
        `context "${o.context}" is not in the kubeconfig (${
          kc
            .getContexts()
            .map((c) => c.name)
            .join(', ') || 'none'
        })`,
      );
    kc.setCurrentContext(o.context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster)
    throw new PluginError('the kubeconfig has no current cluster: set one with kubectl config use-context');
  if (o.output !== undefined && o.output !== 'json' && o.output !== 'table')
    throw new PluginError(`-o ${o.output}: expected json or table`, 2);
  return {
    client: createKubeClient(kc, { requestTimeoutMs: 15_000 }),
    namespace: o.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default',
    namespaceGiven: o.namespace !== undefined,
    output: o.output === 'json' ? 'json' : 'table',
    out: o.out,
    server: cluster.server,
  };
}

/** A failed API call, worded for a person: what was refused, and what to check. */
export function explain(err: unknown, ctx: Pick<PluginContext, 'server'>, what: string, r?: Resource): Error {
  if (err instanceof PluginError) return err;
  if (err instanceof KubeApiError) {
    if (err.status === 401)
      return new PluginError(
        `${what}: the API server at ${ctx.server} did not accept the kubeconfig's credentials`,
      );
    if (err.status === 403)
      return new PluginError(`${what}: forbidden (${err.message.replace(/^.*?: 403 /, '')})`);
    if (err.status === 404 && r && r.group)
      return new PluginError(
        `${what}: the API server does not serve ${r.plural}.${r.group}/${r.version}: is the proxyfleet chart (its CRDs) installed?`,
      );
    return new PluginError(`${what}: ${err.message}`);
  }
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? cause?.message ?? (err as Error).message;
  return new PluginError(`${what}: cannot reach the API server at ${ctx.server} (${detail})`);
}

/** Fixed-width columns, like kubectl get: upper-case headers, two spaces apart. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('   ')
      .trimEnd();
  return [line(headers.map((h) => h.toUpperCase())), ...rows.map(line)].join('\n') + '\n';
}
