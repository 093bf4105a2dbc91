// `kubectl proxyfleet usage ACCOUNT`: an account's bandwidth per product, as the account itself
// reads it (GET /api/v1/usage), through the API server's proxy to the chart's API Service. The
// key is one the operator issued to the account: a ready ApiKey for it in the cluster, read from
// its Secret. The API server drops the Authorization header of a proxied request once it has
// authenticated the caller, so the admin token cannot pass that way; X-API-Key does. Only who may
// read that Secret and proxy to that Service gets an answer (docs/adr/0104).
import { PRODUCTS } from '#common/products.ts';
import { API_KEY } from '../crds/resources.ts';
import type { ApiKey } from '../crds/types.generated.ts';
import { findCondition } from '../runtime/conditions.ts';
import { KubeApiError, resourcePath, type KubeObject } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { explain, PluginError, table, type PluginContext } from './context.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The chart's API Service carries these labels (proxyfleet.componentLabels). */
export const API_SERVICE_SELECTOR = 'app.kubernetes.io/part-of=proxyfleet,app.kubernetes.io/component=api';

export interface UsageOptions {
  /** namespace/name of the API Service; unset: the one Service with the chart's API labels. */
  apiService?: string;
}

interface Usage {
  products: Record<string, { totalGb: number; usedGb: number; remainingGb: number }>;
  requestsCount?: number;
  updatedAt?: string;
}

export async function usage(ctx: PluginContext, accountId: string, o: UsageOptions): Promise<void> {
  if (!UUID.test(accountId))
    throw new PluginError(
      `"${accountId}" is not an account id (a UUID, as in an ApiKey's spec.accountId)`,
      2,
    );
  const [service, key] = await Promise.all([apiService(ctx, o.apiService), accountKey(ctx, accountId)]);
  const path =
    resourcePath(RESOURCES.service, service.namespace, `http:${service.name}:http`, 'proxy') +
    '/api/v1/usage';
  let figures: Usage;
  try {
    figures = await ctx.client.getPath<Usage>(path, { headers: { 'x-api-key': key.value } });
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 401)
      throw new PluginError(
        `the API refused the key of apikey ${key.from} (${err.message.replace(/^.*?: 401 /, '')}): is it revoked outside Kubernetes?`,
      );
    throw explain(
      err,
      ctx,
      `asking the API (Service ${service.namespace}/${service.name}) for account ${accountId}'s usage`,
    );
  }
  if (ctx.output === 'json') {
    ctx.out(JSON.stringify({ accountId, ...figures }, null, 2) + '\n');
    return;
  }
  ctx.out(`account ${accountId}: figures of ${figures.updatedAt ?? 'now'} (read with apikey ${key.from})\n`);
  ctx.out(
    table(
      ['product', 'bought gb', 'used gb', 'remaining gb'],
      PRODUCTS.map((p) => {
        const u = figures.products[p] ?? { totalGb: 0, usedGb: 0, remainingGb: 0 };
        return [p, String(u.totalGb), String(u.usedGb), String(u.remainingGb)];
      }),
    ),
  );
}

async function apiService(
  ctx: PluginContext,
  given: string | undefined,
): Promise<{ namespace: string; name: string }> {
  if (given) {
    const [namespace, name] = given.includes('/') ? given.split('/', 2) : [ctx.namespace, given];
    return { namespace: namespace!, name: name! };
  }
  const found = await ctx.client
    .list<KubeObject>(RESOURCES.service, { labelSelector: API_SERVICE_SELECTOR })
    .catch((err: unknown) => {
      throw explain(err, ctx, 'finding the proxyfleet API Service');
    });
  const names = found.items.map((s) => `${s.metadata.namespace}/${s.metadata.name}`);
  if (names.length === 1) return found.items[0]!.metadata as { namespace: string; name: string };
  throw new PluginError(
    names.length === 0
      ? `no proxyfleet API Service in the cluster (none labelled ${API_SERVICE_SELECTOR}): is the chart installed? Name it with --api-service NAMESPACE/NAME`
      : `several proxyfleet API Services (${names.join(', ')}): choose one with --api-service NAMESPACE/NAME`,
  );
}

/** A key of the account from a ready, unpaused ApiKey's Secret (the first by namespace/name). */
async function accountKey(ctx: PluginContext, accountId: string): Promise<{ value: string; from: string }> {
  const keys = await ctx.client.list<ApiKey>(API_KEY).catch((err: unknown) => {
    throw explain(err, ctx, 'listing ApiKeys', API_KEY);
  });
  const ready = keys.items
    .filter(
      (k) =>
        k.spec.accountId === accountId &&
        !k.spec.revoked &&
        findCondition(k.status?.conditions, 'Ready')?.status === 'True',
    )
    .sort((a, b) =>
      `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(
        `${b.metadata.namespace}/${b.metadata.name}`,
      ),
    );
  if (ready.length === 0)
    throw new PluginError(
      `no ready ApiKey for account ${accountId} in the cluster: the plugin reads usage with the account's own key; create an ApiKey for it (docs/operator.md) or use \`npx proxyfleet admin\``,
    );
  const problems: string[] = [];
  for (const k of ready) {
    const from = `${k.metadata.namespace}/${k.metadata.name}`;
    try {
      const s = await ctx.client.get<KubeObject & { data?: Record<string, string> }>(
        RESOURCES.secret,
        k.metadata.namespace,
        k.spec.secretRef.name,
      );
      const value = s?.data?.[k.spec.secretRef.key];
      if (value) return { value: Buffer.from(value, 'base64').toString(), from };
      problems.push(`${from}: Secret ${k.spec.secretRef.name} holds no key`);
    } catch (err) {
      problems.push(`${from}: ${explain(err, ctx, `reading Secret ${k.spec.secretRef.name}`).message}`);
    }
  }
  throw new PluginError(`no readable key for account ${accountId}: ${problems.join('; ')}`);
}
