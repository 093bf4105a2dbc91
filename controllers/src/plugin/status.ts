// `kubectl proxyfleet status`: every ProxyGateway with its pods (from its Deployment), exits,
// endpoint, TLS certificate expiry (from its Secret) and how many of the namespace's ApiKeys every
// cache has caught up with; then the ApiKeys. A fixed number of list calls (gateways, their
// Deployments, ApiKeys) plus one GET per TLS Secret, so it stays quick on a large fleet.
import { X509Certificate } from 'node:crypto';
import { API_KEY, MANAGED_BY, MANAGED_BY_LABEL, PROXY_GATEWAY } from '../crds/resources.ts';
import type { ApiKey, ProxyGateway } from '../crds/types.generated.ts';
import { findCondition } from '../runtime/conditions.ts';
import { KubeApiError, type KubeObject } from '../runtime/kube.ts';
import { isPaused } from '../runtime/pause.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { childName } from '../proxygateway/desired.ts';
import { explain, table, type PluginContext } from './context.ts';

interface Deployment extends KubeObject {
  spec?: { replicas?: number };
  status?: { replicas?: number; readyReplicas?: number };
}

export interface GatewayRow {
  namespace: string;
  name: string;
  plan: string;
  pods: { ready: number; desired: number } | null;
  exits: string[];
  endpoint: string;
  tls: { secret: string; notAfter?: string; problem?: string } | null;
  keys: { synced: number; total: number };
  ready: string;
  paused: boolean;
}

export interface ApiKeyRow {
  namespace: string;
  name: string;
  accountId: string;
  ready: string;
  synced: string;
  caches: string;
  paused: boolean;
}

const DAY_MS = 86_400_000;

export async function status(ctx: PluginContext, now = new Date()): Promise<void> {
  const namespace = ctx.namespaceGiven ? ctx.namespace : undefined;
  const [gateways, deployments, keys] = await Promise.all([
    ctx.client.list<ProxyGateway>(PROXY_GATEWAY, { namespace }).catch((err: unknown) => {
      throw explain(err, ctx, 'listing ProxyGateways', PROXY_GATEWAY);
    }),
    ctx.client
      .list<Deployment>(RESOURCES.deployment, {
        namespace,
        labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}`,
      })
      .catch((err: unknown) => {
        throw explain(err, ctx, 'listing the gateways’ Deployments');
      }),
    ctx.client.list<ApiKey>(API_KEY, { namespace }).catch((err: unknown) => {
      throw explain(err, ctx, 'listing ApiKeys', API_KEY);
    }),
  ]);
  const byKey = new Map(deployments.items.map((d) => [`${d.metadata.namespace}/${d.metadata.name}`, d]));
  const keyRows = keys.items.map(apiKeyRow);
  const rows: GatewayRow[] = await Promise.all(
    gateways.items.map(async (pgw) => {
      const ns = pgw.metadata.namespace!;
      const d = byKey.get(`${ns}/${childName(pgw)}`);
      const inNamespace = keys.items.filter((k) => k.metadata.namespace === ns && !k.spec.revoked);
      return {
        namespace: ns,
        name: pgw.metadata.name,
        plan: pgw.spec.plan,
        pods: d
          ? { ready: d.status?.readyReplicas ?? 0, desired: d.spec?.replicas ?? d.status?.replicas ?? 0 }
          : null,
        exits: pgw.spec.exits.map((e) => e.name),
        endpoint: pgw.status?.endpoint ?? `${pgw.spec.advertisedHost}:${pgw.spec.port}`,
        tls: pgw.spec.tls ? await certificate(ctx, ns, pgw.spec.tls.secretName) : null,
        keys: {
          synced: inNamespace.filter((k) => findCondition(k.status?.conditions, 'Synced')?.status === 'True')
            .length,
          total: inNamespace.length,
        },
        ready: readyText(pgw.status?.conditions),
        paused: isPaused(pgw),
      };
    }),
  );
  rows.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
  keyRows.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
  if (ctx.output === 'json') {
    ctx.out(JSON.stringify({ gateways: rows, apiKeys: keyRows }, null, 2) + '\n');
    return;
  }
  const where = namespace ? `in namespace ${namespace}` : 'in any namespace';
  ctx.out(
    rows.length === 0
      ? `No ProxyGateways ${where}.\n`
      : table(
          [
            'namespace',
            'gateway',
            'plan',
            'pods',
            'exits',
            'endpoint',
            'tls expires',
            'keys synced',
            'ready',
            'paused',
          ],
          rows.map((r) => [
            r.namespace,
            r.name,
            r.plan,
            r.pods ? `${r.pods.ready}/${r.pods.desired}` : 'no Deployment',
            r.exits.join(','),
            r.endpoint,
            tlsText(r.tls, now),
            `${r.keys.synced}/${r.keys.total}`,
            r.ready,
            r.paused ? 'yes' : '',
          ]),
        ),
  );
  ctx.out('\n');
  ctx.out(
    keyRows.length === 0
      ? `No ApiKeys ${where}.\n`
      : table(
          ['namespace', 'apikey', 'account', 'ready', 'synced', 'caches', 'paused'],
          keyRows.map((k) => [
            k.namespace,
            k.name,
            k.accountId,
            k.ready,
            k.synced,
            k.caches,
            k.paused ? 'yes' : '',
          ]),
        ),
  );
}

function apiKeyRow(k: ApiKey): ApiKeyRow {
  const synced = findCondition(k.status?.conditions, 'Synced');
  return {
    namespace: k.metadata.namespace!,
    name: k.metadata.name,
    accountId: k.spec.accountId,
    ready: readyText(k.status?.conditions),
    synced: synced ? `${synced.status} (${synced.reason})` : 'Unknown',
    caches: k.status?.synced ?? '',
    paused: isPaused(k),
  };
}

/** The Ready condition as `True (PodsReady)`, or `Unknown` before the operator wrote one. */
function readyText(conditions: Parameters<typeof findCondition>[0]): string {
  const c = findCondition(conditions, 'Ready');
  return c ? `${c.status} (${c.reason})` : 'Unknown';
}

async function certificate(
  ctx: PluginContext,
  namespace: string,
  secret: string,
): Promise<GatewayRow['tls']> {
  let s: (KubeObject & { data?: Record<string, string> }) | undefined;
  try {
    s = await ctx.client.get(RESOURCES.secret, namespace, secret);
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 403)
      return { secret, problem: 'Secret not readable (forbidden)' };
    throw explain(err, ctx, `reading Secret ${namespace}/${secret}`);
  }
  const pem = s?.data?.['tls.crt'];
  if (!s) return { secret, problem: `Secret ${secret} missing` };
  if (!pem) return { secret, problem: `Secret ${secret} has no tls.crt` };
  try {
    return {
      secret,
      notAfter: new Date(new X509Certificate(Buffer.from(pem, 'base64')).validTo).toISOString(),
    };
  } catch {
    return { secret, problem: `Secret ${secret}: tls.crt is not a certificate` };
  }
}

function tlsText(tls: GatewayRow['tls'], now: Date): string {
  if (!tls) return '-';
  if (tls.problem) return tls.problem;
  const notAfter = new Date(tls.notAfter!);
  const days = Math.floor((notAfter.getTime() - now.getTime()) / DAY_MS);
  const date = tls.notAfter!.slice(0, 10);
  return days < 0 ? `EXPIRED ${date}` : `${date} (${days}d)`;
}
