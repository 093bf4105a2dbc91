// Where our custom resources live in the API (generated types in types.generated.ts).
import type { Resource } from '../runtime/kube.ts';

export const GROUP = 'proxyfleet.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export const PROXY_GATEWAY: Resource = {
  group: GROUP,
  version: VERSION,
  plural: 'proxygateways',
  kind: 'ProxyGateway',
  namespaced: true,
};
export const API_KEY: Resource = {
  group: GROUP,
  version: VERSION,
  plural: 'apikeys',
  kind: 'ApiKey',
  namespaced: true,
};

/** The one server-side-apply field manager of the operator. */
export const FIELD_MANAGER = 'proxyfleet-operator';
/** Label on every object the operator creates (informers on owned objects select by it). */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'proxyfleet-operator';
