// Where our custom resources live in the API (generated types in types.generated.ts).
import type { Resource } from '../runtime/kube.ts';

export const GROUP = 'proxyfleet.io';
/**
 * What the controllers read, watch and write (docs/adr/0121). v1alpha1 stays the storage version for
 * this release, so that `helm rollback` to a release without v1beta1 finds every object in a version
 * it serves; the next release stores v1beta1.
 */
export const VERSION = 'v1beta1';
export const API_VERSION = `${GROUP}/${VERSION}`;
/** Still served and stored, converted by the controller's webhook (controllers/src/conversion). */
export const ALPHA_VERSION = 'v1alpha1';
/**
 * The gateway's configuration file (the ConfigMap gateway/src/spec.ts reads) keeps its own
 * apiVersion: it is the gateway's format, not the CRD's, and did not change with v1beta1.
 */
export const GATEWAY_CONFIG_API_VERSION = `${GROUP}/v1alpha1`;

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

/** The same collections in v1alpha1 (still served; the webhook converts): tests write the old shape through them. */
export const PROXY_GATEWAY_V1ALPHA1: Resource = { ...PROXY_GATEWAY, version: ALPHA_VERSION };
export const API_KEY_V1ALPHA1: Resource = { ...API_KEY, version: ALPHA_VERSION };

/** The one server-side-apply field manager of the operator. */
export const FIELD_MANAGER = 'proxyfleet-operator';
/** Label on every object the operator creates (informers on owned objects select by it). */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'proxyfleet-operator';
