// The chart's gateway TLS toggle (gatewayTls.certManager, docs/gateway.md "TLS"): cert-manager
// Certificates for the listed gateways and the example ones, whose ProxyGateways then name the
// Secrets. cert-manager's CRDs are not installed in the test API server, so the Certificates are
// checked as rendered (the fields cert-manager's v1 Certificate requires, what they name) and every
// other rendered object, the ProxyGateways with spec.tls included, goes through the server-side
// dry run as in chart.int.test.ts.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, test } from '@jest/globals';
import { stringify } from 'yaml';
import { GATEWAY_CONFIG_API_VERSION } from '../../controllers/src/crds/resources.ts';
import { proxyGatewaySchema } from '../../gateway/src/spec.ts';
import { describeKube } from './describe-kube.ts';
import {
  CHART_DIR,
  CHART_TEST_VALUES,
  helmTemplate,
  helmTemplateText,
  RELEASE_NAMESPACE,
  useKube,
  tool,
} from './env.ts';

const run = promisify(execFile);

const ON = [
  '--set',
  'gatewayTls.certManager.enabled=true',
  '--set',
  'gatewayTls.certManager.issuerRef.name=letsencrypt',
  '--set',
  'examples.enabled=true',
  '--set',
  'gatewayTls.certManager.certificates[0].secretName=mobile-gateway-tls',
  '--set',
  'gatewayTls.certManager.certificates[0].dnsNames[0]=mobile.proxy.example.com',
  '--set',
  'gatewayTls.certManager.certificates[0].namespace=tenant-a',
];

interface Certificate {
  apiVersion: string;
  kind: 'Certificate';
  metadata: { name: string; namespace: string };
  spec: {
    secretName: string;
    dnsNames: string[];
    issuerRef: { name: string; kind: string; group: string };
    privateKey: { algorithm: string; rotationPolicy: string };
    duration: string;
    renewBefore: string;
  };
}

describeKube('Helm chart: gateway TLS certificates (cert-manager)', () => {
  const fx = useKube();

  test('helm lint passes with the toggle on; an issuer is required; unknown keys are refused', async () => {
    const { stdout } = await run(tool('helm'), ['lint', CHART_DIR, ...CHART_TEST_VALUES, ...ON]);
    expect(stdout).toContain('0 chart(s) failed');
    await expect(helmTemplateText(['--set', 'gatewayTls.certManager.enabled=true'])).rejects.toThrow(
      /gatewayTls.certManager.issuerRef.name is required/,
    );
    await expect(helmTemplateText(['--set', 'gatewayTls.certManager.issuer=x'])).rejects.toThrow(
      /additional properties 'issuer' not allowed/,
    );
    await expect(
      helmTemplateText([...ON, '--set', 'gatewayTls.certManager.certificates[1].secretName=no-names']),
    ).rejects.toThrow(/dnsNames/);
  });

  test('renders a Certificate per listed gateway and per example, which name the Secrets', async () => {
    const docs = await helmTemplate(ON);
    const certificates = docs.filter((d) => d.kind === 'Certificate') as unknown as Certificate[];
    expect(certificates.map((c) => `${c.metadata.namespace}/${c.metadata.name}`).sort()).toEqual([
      `${RELEASE_NAMESPACE}/advanced-gateway-tls`,
      `${RELEASE_NAMESPACE}/basic-gateway-tls`,
      `${RELEASE_NAMESPACE}/light-gateway-tls`,
      'tenant-a/mobile-gateway-tls',
    ]);
    for (const c of certificates) {
      expect(c.apiVersion).toBe('cert-manager.io/v1');
      expect(c.spec.secretName).toBe(c.metadata.name);
      expect(c.spec.dnsNames.length).toBeGreaterThan(0);
      expect(c.spec.issuerRef).toEqual({
        name: 'letsencrypt',
        kind: 'ClusterIssuer',
        group: 'cert-manager.io',
      });
      expect(c.spec.privateKey).toEqual(
        expect.objectContaining({ algorithm: 'ECDSA', rotationPolicy: 'Always' }),
      );
      expect([c.spec.duration, c.spec.renewBefore]).toEqual(['2160h', '720h']);
    }
    // Each example gateway names its Secret, for its advertised host; the gateway reads the spec.
    const gateways = docs.filter((d) => d.kind === 'ProxyGateway');
    expect(gateways).toHaveLength(3);
    for (const g of gateways) {
      // A v1beta1 CR; the gateway's file keeps its own apiVersion (docs/adr/0121).
      const parsed = proxyGatewaySchema.parse({ ...g, apiVersion: GATEWAY_CONFIG_API_VERSION });
      const tls = (g as { spec: { tls?: { secretName: string } } }).spec.tls;
      const certificate = certificates.find((c) => c.spec.secretName === tls?.secretName);
      expect(certificate?.spec.dnsNames).toEqual([parsed.spec.advertisedHost]);
      expect(parsed.spec.tls).toEqual({ refuseCredentialsInClear: false });
    }
  });

  test('the rest of the rendered chart, TLS ProxyGateways included, passes the server-side dry run', async () => {
    const docs = (await helmTemplate(ON)).filter((d) => d.kind !== 'Certificate');
    const out = await fx.kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '--force-conflicts', '-n', RELEASE_NAMESPACE, '-f', '-'],
      // YAML 1.1 as kubectl reads it: an unquoted `off` (proxyProtocol.mode's default) is a boolean there.
      { input: docs.map((d) => stringify(d, { version: '1.1' })).join('---\n') },
    );
    expect(out.trim().split('\n')).toHaveLength(docs.length);
    expect(out).toMatch(/proxygateway.proxyfleet.io\/basic serverside-applied \(server dry run\)/);
  });

  test('renders nothing of it with the toggle off (the default), and the examples without spec.tls', async () => {
    const docs = await helmTemplate(['--set', 'examples.enabled=true']);
    expect(docs.filter((d) => d.kind === 'Certificate')).toEqual([]);
    for (const g of docs.filter((d) => d.kind === 'ProxyGateway'))
      expect((g as { spec: Record<string, unknown> }).spec.tls).toBeUndefined();
  });
});
