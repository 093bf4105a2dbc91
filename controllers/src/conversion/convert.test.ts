// The conversion is lossless both ways, for every field of both CRDs: objects are generated from
// the CRDs' own schemas (each property, enum value, map and list; defaulted fields always
// present, as the API server sends them), so a field added to a schema is covered without a
// change here; a coverage check fails if a field is never generated.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { readCrds, type Schema } from '../crds/generate.ts';
import type { ApiKey, ApiKeyV1alpha1 } from '../crds/types.generated.ts';
import {
  ALPHA,
  apiKeyToAlpha,
  apiKeyToBeta,
  BETA,
  BETA_FIELDS_ANNOTATION,
  convertObject,
  reviewResponse,
} from './convert.ts';

/** Values of a schema; object properties present when required or defaulted, else at random. */
function arbitrary(s: Schema): fc.Arbitrary<unknown> {
  if (s['x-kubernetes-int-or-string']) return fc.oneof(fc.nat(), fc.string({ maxLength: 8 }));
  if (s.enum) return fc.constantFrom(...s.enum);
  switch (s.type) {
    case 'string':
      return fc.string({ maxLength: 12 });
    case 'integer':
      return fc.integer({ min: -5, max: 100_000 });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(arbitrary(s.items ?? {}), { maxLength: 3 });
    case 'object': {
      if (s.properties) {
        const always = Object.keys(s.properties).filter(
          (k) => (s.required ?? []).includes(k) || s.properties![k]!.default !== undefined,
        );
        const model = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, arbitrary(v)]));
        return fc.record(model, { requiredKeys: always });
      }
      if (typeof s.additionalProperties === 'object')
        return fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), arbitrary(s.additionalProperties), {
          maxKeys: 3,
        });
      return fc.constant({});
    }
    default:
      return fc.constant(null);
  }
}

/** Annotations as the API server sends them: absent or a non-empty map, never ours (conversion writes it). */
const annotations = fc.option(
  fc.dictionary(
    fc.constantFrom('a.example/x', 'kubectl.kubernetes.io/last-applied-configuration', 'note'),
    fc.string(),
    {
      minKeys: 1,
    },
  ),
  { nil: undefined },
);

async function objects(kind: string) {
  const crd = (await readCrds()).find((c) => c.crd.spec.names.kind === kind)!.crd;
  const of = (version: string) => {
    const root = crd.spec.versions.find((v) => v.name === version)!.schema.openAPIV3Schema;
    return fc
      .record({
        spec: arbitrary(root.properties!.spec!) as fc.Arbitrary<Record<string, unknown>>,
        status: fc.option(arbitrary(root.properties!.status!), { nil: undefined }),
        annotations,
        name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
      })
      .map(({ spec, status, annotations, name }) => ({
        apiVersion: `proxyfleet.io/${version}`,
        kind,
        metadata: {
          name,
          namespace: 'ns',
          uid: 'u-1',
          resourceVersion: '7',
          generation: 3,
          ...(annotations ? { annotations } : {}),
        },
        spec,
        ...(status === undefined ? {} : { status }),
      }));
  };
  return { alpha: of('v1alpha1'), beta: of('v1beta1'), crd };
}

/** Every property path of a schema (arrays as []), and the paths a set of values covers. */
function schemaPaths(s: Schema, at: string, out: Set<string>): Set<string> {
  if (s.properties)
    for (const [k, v] of Object.entries(s.properties)) schemaPaths(v, `${at}.${k}`, out.add(`${at}.${k}`));
  if (s.items) schemaPaths(s.items, `${at}[]`, out);
  return out;
}
function valuePaths(v: unknown, at: string, out: Set<string>): Set<string> {
  if (Array.isArray(v)) v.forEach((x) => valuePaths(x, `${at}[]`, out));
  else if (v !== null && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) valuePaths(x, `${at}.${k}`, out.add(`${at}.${k}`));
  return out;
}

const RUNS = { numRuns: 300 };

describe.each(['ProxyGateway', 'ApiKey'])('%s conversion', (kind) => {
  test('v1alpha1 -> v1beta1 -> v1alpha1 is the identity', async () => {
    const { alpha } = await objects(kind);
    fc.assert(
      fc.property(alpha, (o) => {
        const beta = convertObject(o, BETA);
        expect(beta.apiVersion).toBe(BETA);
        expect(convertObject(beta, ALPHA)).toEqual(o);
      }),
      RUNS,
    );
  });

  test('v1beta1 -> v1alpha1 -> v1beta1 is the identity', async () => {
    const { beta } = await objects(kind);
    fc.assert(
      fc.property(beta, (o) => {
        const alpha = convertObject(o, ALPHA);
        expect(alpha.apiVersion).toBe(ALPHA);
        expect(convertObject(alpha, BETA)).toEqual(o);
      }),
      RUNS,
    );
  });

  test('the generated objects cover every field of both versions', async () => {
    const { alpha, beta, crd } = await objects(kind);
    for (const [version, arb] of [
      ['v1alpha1', alpha],
      ['v1beta1', beta],
    ] as const) {
      const root = crd.spec.versions.find((v) => v.name === version)!.schema.openAPIV3Schema;
      const want = schemaPaths(root.properties!.spec!, 'spec', new Set());
      const seen = new Set<string>();
      for (const o of fc.sample(arb, { numRuns: 2000, seed: 1 })) valuePaths(o.spec, 'spec', seen);
      expect([...want].filter((p) => !seen.has(p))).toEqual([]);
    }
  });

  test('the conversion touches only apiVersion, spec and annotations (what a webhook may change)', async () => {
    const { alpha } = await objects(kind);
    fc.assert(
      fc.property(alpha, (o) => {
        const b = convertObject(o, BETA);
        const { annotations: _a, ...metaBefore } = o.metadata;
        const { annotations: _b, ...metaAfter } = b.metadata;
        expect(metaAfter).toEqual(metaBefore);
        expect(b.status).toEqual((o as { status?: unknown }).status);
      }),
      RUNS,
    );
  });
});

const alphaKey = (
  spec: Partial<ApiKeyV1alpha1['spec']>,
  annotations?: Record<string, string>,
): ApiKeyV1alpha1 => ({
  apiVersion: ALPHA,
  kind: 'ApiKey',
  metadata: { name: 'k', namespace: 'ns', ...(annotations ? { annotations } : {}) },
  spec: { accountId: 'a', primary: false, revoked: false, rotation: 0, secretName: 's', ...spec },
});

describe('ApiKey fields', () => {
  test('primary maps to type, secretName to secretRef.name with the default key', () => {
    const b = apiKeyToBeta(alphaKey({ primary: true }));
    expect(b.spec).toEqual({
      accountId: 'a',
      type: 'Primary',
      revoked: false,
      rotation: 0,
      secretRef: { name: 's', key: 'apiKey' },
    });
    expect(b.metadata.annotations).toBeUndefined();
    expect(apiKeyToBeta(alphaKey({ primary: false, name: 'ci' })).spec.type).toBe('Named');
  });

  test('a secretRef.key v1alpha1 has no place for rides in the annotation, and only that', () => {
    const beta: ApiKey = {
      ...apiKeyToBeta(alphaKey({})),
      metadata: { name: 'k', annotations: { keep: 'me' } },
    };
    beta.spec.secretRef = { name: 's', key: 'PROXYFLEET_API_KEY' };
    const a = apiKeyToAlpha(beta);
    expect(a.metadata.annotations).toEqual({
      keep: 'me',
      [BETA_FIELDS_ANNOTATION]: '{"secretRef":{"key":"PROXYFLEET_API_KEY"}}',
    });
    expect(apiKeyToBeta(a).metadata.annotations).toEqual({ keep: 'me' });
    expect(apiKeyToBeta(a).spec.secretRef).toEqual({ name: 's', key: 'PROXYFLEET_API_KEY' });
  });

  test('an unreadable annotation falls back to the default key rather than failing the conversion', () => {
    const b = apiKeyToBeta(alphaKey({}, { [BETA_FIELDS_ANNOTATION]: '{not json' }));
    expect(b.spec.secretRef).toEqual({ name: 's', key: 'apiKey' });
    expect(b.metadata.annotations).toBeUndefined();
  });
});

describe('ConversionReview', () => {
  test('answers with the request uid and every object converted, or a Failure for an unknown kind', () => {
    const objects = [
      alphaKey({}),
      { apiVersion: BETA, kind: 'ProxyGateway', metadata: { name: 'g' }, spec: {} },
    ];
    const ok = reviewResponse({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'ConversionReview',
      request: { uid: 'r1', desiredAPIVersion: BETA, objects: objects },
    });
    expect(ok.response?.uid).toBe('r1');
    expect(ok.response?.result.status).toBe('Success');
    expect(ok.response?.convertedObjects?.map((o) => o.apiVersion)).toEqual([BETA, BETA]);
    const bad = reviewResponse({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'ConversionReview',
      request: {
        uid: 'r2',
        desiredAPIVersion: BETA,
        objects: [{ ...objects[1]!, kind: 'Other', apiVersion: ALPHA }] as never,
      },
    });
    expect(bad.response?.result).toEqual({
      status: 'Failure',
      message: 'no conversion for Other proxyfleet.io/v1alpha1 -> proxyfleet.io/v1beta1',
    });
  });
});
