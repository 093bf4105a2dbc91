// Conversion between the served versions of our custom resources (docs/adr/0121): pure functions
// the webhook (server.ts) applies to each object of a ConversionReview. Lossless both ways:
// v1alpha1 -> v1beta1 -> v1alpha1 and v1beta1 -> v1alpha1 -> v1beta1 are the identity (the
// property tests in convert.test.ts). A v1beta1 value v1alpha1 has no place for is kept on the
// v1alpha1 object in the annotation BETA_FIELDS_ANNOTATION and restored from it.
import type { ApiKey, ApiKeyV1alpha1, ProxyGateway, ProxyGatewayV1alpha1 } from '../crds/types.generated.ts';
import { ALPHA_VERSION, GROUP, VERSION } from '../crds/resources.ts';
import type { KubeObject } from '../runtime/kube.ts';

/** On a v1alpha1 object: JSON of the v1beta1 spec values it cannot hold (absent when there are none). */
export const BETA_FIELDS_ANNOTATION = 'proxyfleet.io/v1beta1-fields';
/** spec.secretRef.key's default: the one data key v1alpha1 writes the key under. */
export const DEFAULT_SECRET_KEY = 'apiKey';

export const ALPHA = `${GROUP}/${ALPHA_VERSION}`;
export const BETA = `${GROUP}/${VERSION}`;

type Obj = KubeObject & { spec?: Record<string, unknown>; status?: unknown };

/** The v1beta1 values a v1alpha1 object keeps in its annotation. */
interface BetaFields {
  secretRef?: { key?: string };
}

function readBetaFields(o: KubeObject): BetaFields {
  const raw = o.metadata.annotations?.[BETA_FIELDS_ANNOTATION];
  if (raw === undefined) return {};
  try {
    const parsed = JSON.parse(raw) as unknown;
    return parsed !== null && typeof parsed === 'object' ? parsed : {};
  } catch {
    // Edited by hand into something unreadable: the defaults apply, as for an object without it.
    return {};
  }
}

/**
 * metadata with the annotation set to `fields`, or taken out when undefined (an annotations map
 * it leaves empty goes too: the API server never sends an empty one).
 */
function withBetaFields(
  meta: KubeObject['metadata'],
  fields: BetaFields | undefined,
): KubeObject['metadata'] {
  if (fields)
    return {
      ...meta,
      annotations: { ...meta.annotations, [BETA_FIELDS_ANNOTATION]: JSON.stringify(fields) },
    };
  if (meta.annotations?.[BETA_FIELDS_ANNOTATION] === undefined) return meta;
  const { [BETA_FIELDS_ANNOTATION]: _dropped, ...annotations } = meta.annotations;
  const { annotations: _all, ...rest } = meta;
  return Object.keys(annotations).length > 0 ? { ...rest, annotations } : rest;
}

export function apiKeyToBeta(o: ApiKeyV1alpha1): ApiKey {
  const { primary, secretName, ...rest } = o.spec;
  const key = readBetaFields(o).secretRef?.key ?? DEFAULT_SECRET_KEY;
  const spec = {
    ...rest,
    ...(primary === undefined ? {} : { type: primary ? 'Primary' : 'Named' }),
    ...(secretName === undefined ? {} : { secretRef: { name: secretName, key } }),
  } as ApiKey['spec'];
  return { ...o, apiVersion: BETA, metadata: withBetaFields(o.metadata, undefined), spec };
}

export function apiKeyToAlpha(o: ApiKey): ApiKeyV1alpha1 {
  const { type, secretRef, ...rest } = o.spec;
  const spec = {
    ...rest,
    ...(type === undefined ? {} : { primary: type === 'Primary' }),
    ...(secretRef === undefined ? {} : { secretName: secretRef.name }),
  } as ApiKeyV1alpha1['spec'];
  // v1alpha1 always writes under the default key: only another key needs the annotation.
  const key = secretRef?.key ?? DEFAULT_SECRET_KEY;
  const fields = key === DEFAULT_SECRET_KEY ? undefined : { secretRef: { key } };
  return { ...o, apiVersion: ALPHA, metadata: withBetaFields(o.metadata, fields), spec };
}

/** v1beta1 only tightened ProxyGateway's validation: the spec is the same in both. */
export const proxyGatewayToBeta = (o: ProxyGatewayV1alpha1): ProxyGateway => ({ ...o, apiVersion: BETA });
export const proxyGatewayToAlpha = (o: ProxyGateway): ProxyGatewayV1alpha1 => ({ ...o, apiVersion: ALPHA });

/** One object to `desiredAPIVersion`; throws on a kind or version this operator does not serve. */
export function convertObject(object: Obj, desiredAPIVersion: string): Obj {
  if (object.apiVersion === desiredAPIVersion) return object;
  const to = `${object.kind} ${object.apiVersion} -> ${desiredAPIVersion}`;
  if (object.kind === 'ApiKey') {
    if (object.apiVersion === ALPHA && desiredAPIVersion === BETA)
      return apiKeyToBeta(object as unknown as ApiKeyV1alpha1);
    if (object.apiVersion === BETA && desiredAPIVersion === ALPHA)
      return apiKeyToAlpha(object as unknown as ApiKey);
  }
  if (object.kind === 'ProxyGateway') {
    if (object.apiVersion === ALPHA && desiredAPIVersion === BETA)
      return proxyGatewayToBeta(object as unknown as ProxyGatewayV1alpha1);
    if (object.apiVersion === BETA && desiredAPIVersion === ALPHA)
      return proxyGatewayToAlpha(object as unknown as ProxyGateway);
  }
  throw new Error(`no conversion for ${to}`);
}

export interface ConversionReview {
  apiVersion: string;
  kind: 'ConversionReview';
  request?: { uid: string; desiredAPIVersion: string; objects: Obj[] };
  response?: {
    uid: string;
    result: { status: 'Success' | 'Failure'; message?: string };
    convertedObjects?: Obj[];
  };
}

/** The response to a ConversionReview (apiextensions.k8s.io/v1): every object, or a Failure. */
export function reviewResponse(review: ConversionReview): ConversionReview {
  const request = review.request;
  if (!request) throw new Error('a ConversionReview without a request');
  try {
    const convertedObjects = request.objects.map((o) => convertObject(o, request.desiredAPIVersion));
    return {
      apiVersion: review.apiVersion,
      kind: 'ConversionReview',
      response: { uid: request.uid, result: { status: 'Success' }, convertedObjects },
    };
  } catch (err) {
    return {
      apiVersion: review.apiVersion,
      kind: 'ConversionReview',
      response: { uid: request.uid, result: { status: 'Failure', message: (err as Error).message } },
    };
  }
}
