import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import { readProxyCredentials } from '#common/accounts/accounts.ts';
import { DEFAULT_GATEWAY_PORTS, plansServingTls, readGatewayEndpoint } from '#common/gateway-endpoints.ts';
import type { Product } from '#common/products.ts';
import { newSessionId, unseal } from '#common/secrets.ts';
import { readSubUserCredentials } from '#api/modules/sub-users/repo.ts';
import { credentialFor, proxyString, proxyUrl } from './format.ts';
import { serves, targetText } from '#api/modules/locations/service.ts';
import { formatList, type Formatted, type ProxyParts } from './list-format.ts';
import { listIspProxies, remainingBytes, type IspProxyRow } from './repo.ts';
import type { GenerateRequest, IspProxy, ListQuery } from './schemas.ts';

export interface ProxiesDeps {
  pool: Pool;
  credentialsKey: Buffer;
  /** Host for plans with no gateway_endpoints row (PROXYFLEET_PUBLIC_GATEWAY_HOST). */
  fallbackHost: string;
}

export interface GeneratedProxies extends Partial<Formatted> {
  proxies: string[];
  /** With `scheme`: the same proxies as URLs, in the same order. */
  urls?: string[];
}

/** The plans whose https:// form works (their gateways serve TLS). */
export const tlsPlans = (deps: ProxiesDeps): Promise<Product[]> => plansServingTls(deps.pool);

/** `count` proxies in the plan's format, and with `req.scheme` the same as URLs. */
export async function generateProxySet(
  deps: ProxiesDeps,
  accountId: string,
  req: GenerateRequest,
): Promise<GeneratedProxies> {
  const remaining = await remainingBytes(deps.pool, accountId, req.provider);
  if (remaining === undefined || remaining <= 0) throw new AppError('NO_BANDWIDTH', { plan: req.provider });
  const endpoint = (await readGatewayEndpoint(deps.pool, req.provider)) ?? {
    host: deps.fallbackHost,
    port: DEFAULT_GATEWAY_PORTS[req.provider],
    tls: false,
    refuseCredentialsInClear: false,
    locations: null,
  };
  // An https:// URL to a port without TLS would fail in the customer's client (docs/adr/0083).
  if (req.scheme === 'https' && !endpoint.tls) throw new AppError('TLS_NOT_SERVED', { plan: req.provider });
  // Its gateways would refuse the credentials of an http:// or socks5h:// URL, both in clear
  // (docs/adr/0096): only https:// is given.
  if ((req.scheme === 'http' || req.scheme === 'socks5h') && endpoint.refuseCredentialsInClear)
    throw new AppError('CLEAR_CREDENTIALS_REFUSED', { plan: req.provider });
  // A target none of the plan's exits serves would only meet 503 no_exit at traffic time.
  const served = endpoint.locations ?? undefined;
  if (served && !serves(served, req))
    throw new AppError('TARGET_NOT_SERVED', { plan: req.provider, target: targetText(req) });
  const base = req.subUser
    ? await readSubUserCredentials(deps.pool, accountId, req.subUser, deps.credentialsKey)
    : await readProxyCredentials(deps.pool, accountId, deps.credentialsKey);
  const minutes = req.lifetime ?? req.sessionDuration;
  const proxies: string[] = [];
  const urls: string[] = [];
  const parts: ProxyParts[] = [];
  for (let i = 0; i < req.count; i++) {
    const credentials = credentialFor(req.provider, base, {
      country: req.country,
      state: req.state,
      city: req.city,
      session: req.sessionType === 'sticky' ? newSessionId() : undefined,
      minutes,
    });
    proxies.push(proxyString(endpoint.host, endpoint.port, credentials));
    if (req.scheme) urls.push(proxyUrl(req.scheme, endpoint.host, endpoint.port, credentials));
    if (req.format) parts.push({ host: endpoint.host, port: endpoint.port, ...credentials });
  }
  const formatted = req.format ? formatList(parts, req.format, req) : {};
  return { proxies, ...(req.scheme ? { urls } : {}), ...formatted };
}

export async function ispProxies(deps: ProxiesDeps, accountId: string): Promise<IspProxy[]> {
  return (await listIspProxies(deps.pool, accountId)).map((row) => toIspProxy(row, deps.credentialsKey));
}

/** The ISP proxies, and with `format` the same list formatted (URLs are http://: docs/adr/0087). */
export async function ispProxyList(
  deps: ProxiesDeps,
  accountId: string,
  query: ListQuery,
): Promise<{ proxies: IspProxy[] } & Partial<Formatted>> {
  const proxies = await ispProxies(deps, accountId);
  return { proxies, ...(query.format ? formatList(proxies, query.format, query) : {}) };
}

export function toIspProxy(row: IspProxyRow, credentialsKey: Buffer): IspProxy {
  const password = unseal(credentialsKey, row.password_enc);
  return {
    id: row.id,
    host: row.host,
    port: row.port,
    username: row.username,
    password,
    proxy: `${row.host}:${row.port}:${row.username}:${password}`,
    country: row.country,
    city: row.city,
    isp: row.isp,
    status: row.status === 'active' && row.expired ? 'expired' : row.status,
    expiresAt: row.expires_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    health: {
      state: row.health_state ?? 'unchecked',
      checkedAt: row.health_checked_at?.toISOString() ?? null,
      since: row.health_changed_at?.toISOString() ?? null,
    },
    rental:
      row.rental_id && row.rental_status && row.rental_paid_until
        ? {
            subscriptionId: row.rental_id,
            status: row.rental_status,
            paidUntil: row.rental_paid_until.toISOString(),
          }
        : null,
  };
}
