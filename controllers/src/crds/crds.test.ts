// crds/ is the single source: the generated TypeScript types and chart CRD templates must match
// it, and the ProxyGateway CRD must accept exactly what the gateway reads (gateway/src/spec.ts)
// plus the Kubernetes-only fields (decisions.md). When either side changes, this fails.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';
import { proxyGatewaySpecSchema, readProxyGateways } from '../../../gateway/src/spec.ts';
import { generatedFiles, readCrds, ROOT } from './generate.ts';

/** Kubernetes-only spec fields the gateway process never reads: its pods' size, Service and placement. */
const KUBERNETES_ONLY = [
  'replicas',
  'autoscaling',
  'resources',
  'service',
  'healthPort',
  'hostNetwork',
  'nodeSelector',
  'tolerations',
  'affinity',
  'topologySpreadConstraints',
  'priorityClassName',
  'podAnnotations',
  'podLabels',
];
/** Kubernetes-only fields inside gateway fields: tls.secretName (the operator mounts the Secret). */
const KUBERNETES_ONLY_NESTED: Record<string, string[]> = { tls: ['secretName'] };

/** The object schema without the named fields (also taken out of `required`). */
function without(s: JsonSchema, fields: string[]): JsonSchema {
  return {
    ...s,
    required: (s.required ?? []).filter((r) => !fields.includes(r)),
    properties: Object.fromEntries(Object.entries(s.properties ?? {}).filter(([k]) => !fields.includes(k))),
  };
}

interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  default?: unknown;
}

/** What both schemas must agree on: field names, types, enums, required fields, leaf defaults. */
function shape(s: JsonSchema): unknown {
  if (s.enum) return { enum: [...s.enum].map(String).sort() };
  if (s.anyOf) {
    const types = [...new Set(s.anyOf.map((a) => a.type))];
    return types.length === 1 ? { type: types[0] } : { anyOf: types.sort() };
  }
  if (s.type === 'array') return { type: 'array', items: shape(s.items ?? {}) };
  if (s.type === 'object' && s.properties) {
    return {
      type: 'object',
      required: [...(s.required ?? [])].sort(),
      properties: Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, shape(v)])),
    };
  }
  return s.default !== undefined ? { type: s.type, default: s.default } : { type: s.type };
}

describe('crds/ is the single source of truth', () => {
  test('generated TypeScript types and chart CRD templates are up to date (npm run crds:generate)', async () => {
    for (const [file, expected] of await generatedFiles()) {
      const actual = await readFile(path.join(ROOT, file), 'utf8').catch(() => '(missing)');
      expect({ file, content: actual }).toEqual({ file, content: expected });
    }
  });

  test.each(['v1beta1', 'v1alpha1'])(
    'the ProxyGateway CRD spec (%s) is the gateway schema plus the Kubernetes-only fields',
    async (version) => {
      const crds = await readCrds();
      const pgw = crds.find((c) => c.crd.spec.names.kind === 'ProxyGateway')!;
      const crdSpec = pgw.crd.spec.versions.find((v) => v.name === version)!.schema.openAPIV3Schema
        .properties!.spec as JsonSchema;
      const gatewayOnly: JsonSchema = {
        ...crdSpec,
        properties: Object.fromEntries(
          Object.entries(crdSpec.properties!)
            .filter(([k]) => !KUBERNETES_ONLY.includes(k))
            .map(([k, v]) => [k, KUBERNETES_ONLY_NESTED[k] ? without(v, KUBERNETES_ONLY_NESTED[k]) : v]),
        ),
      };
      const fromZod = z.toJSONSchema(proxyGatewaySpecSchema, {
        io: 'input',
        unrepresentable: 'any',
      }) as JsonSchema;
      expect(shape(gatewayOnly)).toEqual(shape(fromZod));
      expect(
        Object.keys(crdSpec.properties!)
          .filter((k) => !(k in fromZod.properties!))
          .sort(),
      ).toEqual([...KUBERNETES_ONLY].sort());
      expect((crdSpec.properties!.plan!.enum as string[]).sort()).toEqual([...PRODUCTS].sort());
    },
  );

  test('both CRDs: group proxyfleet.io, v1alpha1 stored and v1beta1 served through the webhook, status subresource, short names, printer columns', async () => {
    const crds = await readCrds();
    const byKind = Object.fromEntries(
      crds.map((c) => [c.crd.spec.names.kind, c.crd as unknown as Record<string, any>]),
    );
    expect(byKind.ProxyGateway!.spec.names.shortNames).toEqual(['pgw']);
    expect(byKind.ApiKey!.spec.names.shortNames).toEqual(['ak']);
    const columns = (kind: string, version = 0) =>
      byKind[kind]!.spec.versions[version].additionalPrinterColumns.map((c: { name: string }) => c.name);
    // Exits and FailedExits (-o wide): the exits as the pods' heartbeats report them (docs/adr/0117).
    expect(columns('ProxyGateway')).toEqual([
      'Plan',
      'Port',
      'Ready',
      'Exits',
      'FailedExits',
      'Status',
      'Paused',
      'Endpoint',
      'Age',
    ]);
    // docs/adr/0031: one NAME column, READY from the Ready condition, the cache counts named CACHES.
    expect(columns('ApiKey')).toEqual([
      'Account',
      'Key',
      'Ready',
      'Reason',
      'Paused',
      'Type',
      'Revoked',
      'Caches',
      'Age',
    ]);
    // v1alpha1 keeps its own columns: Primary where v1beta1 has Type (docs/adr/0121).
    expect(columns('ApiKey', 1)).toEqual(
      columns('ApiKey').map((c: string) => (c === 'Type' ? 'Primary' : c)),
    );
    expect(columns('ProxyGateway', 1)).toEqual(columns('ProxyGateway'));
    for (const crd of Object.values(byKind)) {
      expect(crd.spec.group).toBe('proxyfleet.io');
      expect(
        crd.spec.versions.map((v: { name: string; served: boolean; storage: boolean }) => [
          v.name,
          v.served,
          v.storage,
        ]),
      ).toEqual([
        ['v1beta1', true, false],
        ['v1alpha1', true, true],
      ]);
      for (const v of crd.spec.versions) expect(v.subresources).toEqual({ status: {} });
      expect(crd.spec.conversion).toMatchObject({
        strategy: 'Webhook',
        webhook: {
          conversionReviewVersions: ['v1'],
          clientConfig: { service: { path: '/convert', port: 9443 } },
        },
      });
    }
  });

  test('strict schemas, no node keeps unknown fields', async () => {
    const loose: string[] = [];
    const walk = (node: unknown, at: string): void => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${at}[${i}]`));
      if (node === null || typeof node !== 'object') return;
      for (const [k, v] of Object.entries(node)) {
        if (k === 'x-kubernetes-preserve-unknown-fields' || (k === 'additionalProperties' && v === true))
          loose.push(`${at}.${k}`);
        walk(v, `${at}.${k}`);
      }
    };
    for (const { crd, source } of await readCrds()) walk(crd.spec.versions, source);
    expect(loose).toEqual([]);
  });

  test('dev/gateways.yaml parses with the gateway schema', async () => {
    const gateways = await readProxyGateways(path.join(ROOT, 'dev/gateways.yaml'));
    expect(gateways.map((g) => g.spec.plan).sort()).toEqual([...PRODUCTS].sort());
  });
});
