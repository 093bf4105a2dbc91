// HTTPS for the API and the dashboard through the chart (docs/operator.md, "HTTPS for the API and
// dashboard"; docs/adr/0123): api.ingress (an Ingress with TLS from a named Secret, or from a
// cert-manager Certificate the chart makes) and api.httpRoute (a Gateway API HTTPRoute; TLS is the
// Gateway's listener). Rendered with helm and sent through the server-side dry run of a real
// kube-apiserver, which holds the standard-channel HTTPRoute CRD of Gateway API v1.6.3
// (test/kube/gateway-api/). cert-manager's CRDs are not there: the Certificate is checked as rendered.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, test } from '@jest/globals';
import { stringify } from 'yaml';
import { describeKube } from './describe-kube.ts';
import {
  CHART_DIR,
  CHART_TEST_VALUES,
  helmTemplate,
  helmTemplateText,
  RELEASE_NAMESPACE,
  tool,
  useKube,
} from './env.ts';

const run = promisify(execFile);
const HTTPROUTE_CRD = path.join(import.meta.dirname, 'gateway-api/gateway.networking.k8s.io_httproutes.yaml');

const TRUSTED = ['--set', 'api.trustedProxies[0]=10.42.0.0/16'];
const HOSTS = [
  '--set',
  'api.ingress.hosts[0]=api.example.test',
  '--set',
  'api.ingress.hosts[1]=dashboard.example.test',
];
const INGRESS_SECRET = [
  ...TRUSTED,
  '--set',
  'api.ingress.enabled=true',
  '--set',
  'api.ingress.className=traefik',
  '--set',
  'api.ingress.annotations.example\\.test/tier=public',
  ...HOSTS,
  '--set',
  'api.ingress.tls.secretName=proxyfleet-api-cert',
];
const INGRESS_ISSUER = [
  ...TRUSTED,
  '--set',
  'api.ingress.enabled=true',
  ...HOSTS,
  '--set',
  'api.ingress.certManager.issuer=letsencrypt',
];
const ROUTE = [
  ...TRUSTED,
  '--set',
  'api.httpRoute.enabled=true',
  '--set',
  'api.httpRoute.parentRefs[0].name=public',
  '--set',
  'api.httpRoute.parentRefs[0].namespace=gateway-system',
  '--set',
  'api.httpRoute.parentRefs[0].sectionName=https',
  '--set',
  'api.httpRoute.hostnames[0]=api.example.test',
];

type Doc = Record<string, unknown> & { kind: string; metadata: { name: string; annotations?: object } };
const ofKind = (docs: Array<Record<string, unknown>>, kind: string) =>
  docs.filter((d) => d.kind === kind) as Doc[];
const spec = (d: Doc) => d.spec as Record<string, unknown>;

describeKube('Helm chart: HTTPS for the API and dashboard (Ingress, HTTPRoute)', () => {
  const fx = useKube();

  const dryRun = (docs: Array<Record<string, unknown>>) =>
    fx.kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '--force-conflicts', '-n', RELEASE_NAMESPACE, '-f', '-'],
      { input: docs.map((d) => stringify(d, { version: '1.1' })).join('---\n') },
    );

  test('off by default: no Ingress, HTTPRoute or Certificate, no trusted proxies', async () => {
    const docs = await helmTemplate();
    expect(docs.filter((d) => ['Ingress', 'HTTPRoute', 'Certificate'].includes(d.kind as string))).toEqual(
      [],
    );
    expect(await helmTemplateText()).not.toContain('PROXYFLEET_API_TRUSTED_PROXIES');
  });

  test('helm lint passes; hosts, TLS, trusted proxies and parentRefs are required; typos refused', async () => {
    const { stdout } = await run(tool('helm'), ['lint', CHART_DIR, ...CHART_TEST_VALUES, ...INGRESS_SECRET]);
    expect(stdout).toContain('0 chart(s) failed');
    const without = (args: string[], name: string) => {
      const at = args.findIndex((a) => a.startsWith(name));
      return [...args.slice(0, at - 1), ...args.slice(at + 1)];
    };
    await expect(helmTemplateText(without(INGRESS_SECRET, 'api.trustedProxies'))).rejects.toThrow(
      /api.trustedProxies is required with api.ingress or api.httpRoute/,
    );
    await expect(helmTemplateText(without(ROUTE, 'api.trustedProxies'))).rejects.toThrow(
      /api.trustedProxies is required/,
    );
    await expect(helmTemplateText(without(INGRESS_SECRET, 'api.ingress.tls.secretName'))).rejects.toThrow(
      /api.ingress needs TLS/,
    );
    await expect(
      helmTemplateText([
        ...TRUSTED,
        '--set',
        'api.ingress.enabled=true',
        '--set',
        'api.ingress.tls.secretName=x',
      ]),
    ).rejects.toThrow(/api.ingress.hosts is required/);
    await expect(helmTemplateText([...TRUSTED, '--set', 'api.httpRoute.enabled=true'])).rejects.toThrow(
      /api.httpRoute.parentRefs is required/,
    );
    await expect(helmTemplateText(['--set', 'api.ingress.tlsSecret=x'])).rejects.toThrow(
      /additional properties 'tlsSecret' not allowed/,
    );
    await expect(helmTemplateText(['--set', 'api.trustedProxies[0]=10.42.0.0'])).rejects.toThrow(
      /trustedProxies/,
    );
    await expect(helmTemplateText(['--set', 'api.ingress.hosts[0]=Not_A_Host'])).rejects.toThrow(/hosts/);
  });

  test('the Ingress: every host to the API Service over TLS from the named Secret; the API trusts the proxies', async () => {
    const docs = await helmTemplate(INGRESS_SECRET);
    const [ingress, ...more] = ofKind(docs, 'Ingress');
    expect(more).toEqual([]);
    expect(ingress!.apiVersion).toBe('networking.k8s.io/v1');
    expect(ingress!.metadata.annotations).toEqual({ 'example.test/tier': 'public' });
    const backend = { service: { name: 'proxyfleet-api', port: { name: 'http' } } };
    expect(spec(ingress!)).toEqual({
      ingressClassName: 'traefik',
      tls: [{ hosts: ['api.example.test', 'dashboard.example.test'], secretName: 'proxyfleet-api-cert' }],
      rules: ['api.example.test', 'dashboard.example.test'].map((host) => ({
        host,
        http: { paths: [{ path: '/', pathType: 'Prefix', backend }] },
      })),
    });
    expect(ofKind(docs, 'Certificate')).toEqual([]);
    // The Service's port is named http: the Ingress names it rather than a number.
    const service = ofKind(docs, 'Service').find((s) => s.metadata.name === 'proxyfleet-api')!;
    expect(spec(service).ports).toEqual([expect.objectContaining({ name: 'http' })]);
    const deployment = ofKind(docs, 'Deployment').find((d) => d.metadata.name === 'proxyfleet-api')!;
    const env = (spec(deployment).template as { spec: { containers: { env: object[] }[] } }).spec
      .containers[0]!.env;
    expect(env).toContainEqual({ name: 'PROXYFLEET_API_TRUSTED_PROXIES', value: '10.42.0.0/16' });
  });

  test('with certManager.issuer: a Certificate for the hosts writes the Secret the Ingress names', async () => {
    const docs = await helmTemplate(INGRESS_ISSUER);
    const [certificate, ...more] = ofKind(docs, 'Certificate');
    expect(more).toEqual([]);
    expect(certificate!.apiVersion).toBe('cert-manager.io/v1');
    expect(spec(certificate!)).toMatchObject({
      secretName: 'proxyfleet-api-tls',
      dnsNames: ['api.example.test', 'dashboard.example.test'],
      issuerRef: { name: 'letsencrypt', kind: 'ClusterIssuer', group: 'cert-manager.io' },
      privateKey: { algorithm: 'ECDSA', rotationPolicy: 'Always' },
      duration: '2160h',
      renewBefore: '720h',
    });
    const ingress = ofKind(docs, 'Ingress')[0]!;
    expect((spec(ingress).tls as { secretName: string }[])[0]!.secretName).toBe('proxyfleet-api-tls');
    expect(spec(ingress).ingressClassName).toBeUndefined();
  });

  test('the HTTPRoute: attached to the Gateway listener, every path to the API Service', async () => {
    const docs = await helmTemplate(ROUTE);
    const [route, ...more] = ofKind(docs, 'HTTPRoute');
    expect(more).toEqual([]);
    expect(route!.apiVersion).toBe('gateway.networking.k8s.io/v1');
    expect(spec(route!)).toEqual({
      parentRefs: [{ name: 'public', namespace: 'gateway-system', sectionName: 'https' }],
      hostnames: ['api.example.test'],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/' } }],
          backendRefs: [{ name: 'proxyfleet-api', port: 8080 }],
        },
      ],
    });
    expect(ofKind(docs, 'Ingress')).toEqual([]);
  });

  test('the Ingress and the HTTPRoute pass the server-side dry run (Gateway API v1.6.3 CRD)', async () => {
    await fx.kube.apply(await readFile(HTTPROUTE_CRD, 'utf8'));
    await fx.kube.kubectl([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/httproutes.gateway.networking.k8s.io',
    ]);
    const docs = (await helmTemplate([...INGRESS_SECRET, ...ROUTE])).filter((d) => d.kind !== 'Certificate');
    const out = await dryRun(docs);
    expect(out.trim().split('\n')).toHaveLength(docs.length);
    expect(out).toContain('ingress.networking.k8s.io/proxyfleet-api serverside-applied (server dry run)');
    expect(out).toContain(
      'httproute.gateway.networking.k8s.io/proxyfleet-api serverside-applied (server dry run)',
    );
    // The CRD's own validation runs: a route with a relative path is refused by it.
    const route = docs.find((d) => d.kind === 'HTTPRoute') as Doc;
    const bad = structuredClone(route);
    (spec(bad).rules as { matches: { path: { value: string } }[] }[])[0]!.matches[0]!.path.value = 'api';
    await expect(dryRun([bad])).rejects.toThrow(/path/i);
  });
});
