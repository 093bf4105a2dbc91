// The Helm chart: lints, rejects unknown values, renders, and the test API server accepts every
// rendered object in a server-side dry run; its example ProxyGateways (and dev/gateways.yaml) are
// valid for both the CRD and the gateway's own schema.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, test } from '@jest/globals';
import { parseAllDocuments } from 'yaml';
import { proxyGatewaySchema } from '../../gateway/src/spec.ts';
import { loadApiConfig } from '#api/config.ts';
import { loadControllerConfig } from '../../controllers/src/config.ts';
import { GATEWAY_CONFIG_API_VERSION } from '../../controllers/src/crds/resources.ts';
import { loadRelayConfig } from '../../relay/src/config.ts';
import { loadWorkerConfig } from '../../worker/src/config.ts';
import { describeKube } from './describe-kube.ts';
import {
  CHART_DIR,
  CHART_TEST_VALUES,
  helmTemplate,
  helmTemplateText,
  REPO_ROOT,
  RELEASE_NAMESPACE,
  useKube,
  tool,
} from './env.ts';

const run = promisify(execFile);
type Doc = { kind: string; metadata: { name: string; annotations?: Record<string, string> } } & Record<
  string,
  unknown
>;

describeKube('Helm chart charts/proxyfleet', () => {
  const fx = useKube();

  test('helm lint passes; values.schema.json rejects unknown keys and a missing database', async () => {
    const { stdout } = await run(tool('helm'), [
      'lint',
      CHART_DIR,
      ...CHART_TEST_VALUES,
      '--set',
      'examples.enabled=true',
      '--set',
      'serviceMonitor.enabled=true',
    ]);
    expect(stdout).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    await expect(helmTemplateText(['--set', 'controller.replica=2'])).rejects.toThrow(
      /additional properties 'replica' not allowed/,
    );
    await expect(helmTemplateText(['--set', 'nonsense=true'])).rejects.toThrow(
      /additional properties 'nonsense' not allowed/,
    );
    await expect(run(tool('helm'), ['template', 'x', CHART_DIR])).rejects.toThrow(/database.existingSecret/);
    // The links in emails come from configuration only: no dashboard URL, no install.
    const withoutDashboardUrl = CHART_TEST_VALUES.filter(
      (v) => v !== '--set' && !v.startsWith('api.dashboardUrl='),
    );
    await expect(
      run(tool('helm'), ['template', 'x', CHART_DIR, ...withoutDashboardUrl.flatMap((v) => ['--set', v])]),
    ).rejects.toThrow(/api.dashboardUrl is required/);
    await expect(helmTemplateText(['--set', 'api.dashboardUrl=evil.example'])).rejects.toThrow(
      /dashboardUrl/,
    );
  });

  test('helm template | kubectl apply --server-side --dry-run=server is accepted by the API server', async () => {
    const rendered = await helmTemplateText(['--set', 'examples.enabled=true']);
    const out = await fx.kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '--force-conflicts', '-n', RELEASE_NAMESPACE, '-f', '-'],
      { input: rendered },
    );
    const kinds = (await helmTemplate(['--set', 'examples.enabled=true'])).map((d) => `${d.kind as string}`);
    for (const kind of [
      'Deployment',
      'Service',
      'ServiceAccount',
      'ClusterRole',
      'ClusterRoleBinding',
      'Role',
      'RoleBinding',
      'Secret',
      'CustomResourceDefinition',
      'ProxyGateway',
    ]) {
      expect(kinds).toContain(kind);
    }
    expect(out.trim().split('\n')).toHaveLength(kinds.length);
    expect(out).toMatch(/proxygateway.proxyfleet.io\/basic serverside-applied \(server dry run\)/);
    expect(out).toMatch(/deployment.apps\/proxyfleet-controller serverside-applied \(server dry run\)/);
  });

  test('the examples behind a PROXY-protocol load balancer are accepted; the CRD refuses what the gateway would', async () => {
    const edge = [
      '--set',
      'examples.enabled=true',
      '--set',
      'examples.proxyProtocol.mode=required',
      '--set',
      'examples.proxyProtocol.trustedCidrs={10.0.0.0/8,fd00::/8}',
      '--set',
      'examples.externalTrafficPolicy=Local',
    ];
    const examples = ((await helmTemplate(edge)) as Doc[]).filter((d) => d.kind === 'ProxyGateway');
    // The examples are v1beta1 CRs; the gateway's file keeps its own apiVersion (docs/adr/0121).
    for (const example of examples)
      expect(
        proxyGatewaySchema.safeParse({ ...example, apiVersion: GATEWAY_CONFIG_API_VERSION }).error?.issues ??
          [],
      ).toEqual([]);
    const out = await fx.kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '-n', RELEASE_NAMESPACE, '-f', '-'],
      { input: examples.map((e) => JSON.stringify(e)).join('\n') },
    );
    expect(out.match(/serverside-applied \(server dry run\)/g)).toHaveLength(3);
    const basic = structuredClone(examples.find((e) => e.metadata.name === 'basic')!) as Doc & {
      spec: Record<string, Record<string, unknown>>;
    };
    const refused = async (change: (spec: Record<string, Record<string, unknown>>) => void) => {
      const doc = structuredClone(basic);
      change(doc.spec);
      return fx.kube
        .kubectl(['apply', '--server-side', '--dry-run=server', '-n', RELEASE_NAMESPACE, '-f', '-'], {
          input: JSON.stringify(doc),
        })
        .then(
          () => 'accepted',
          (err: Error) => err.message,
        );
    };
    expect(await refused((s) => (s.proxyProtocol!.trustedCidrs = []))).toMatch(
      /optional and required need trustedCidrs/,
    );
    expect(await refused((s) => (s.proxyProtocol!.trustedCidrs = ['10.0.0.0/33']))).toMatch(
      /an address range/,
    );
    expect(await refused((s) => (s.service!.type = 'ClusterIP'))).toMatch(
      /externalTrafficPolicy needs type NodePort or LoadBalancer/,
    );
    expect(await refused((s) => (s.service!.loadBalancerSourceRanges = ['not a range']))).toMatch(
      /an address range/,
    );
  });

  test('controller, api, relay and worker Deployments; CRDs behind crds.enabled, kept on uninstall', async () => {
    const docs = (await helmTemplate()) as Doc[];
    const deployments = docs
      .filter((d) => d.kind === 'Deployment')
      .map((d) => d.metadata.name)
      .sort();
    expect(deployments).toEqual([
      'proxyfleet-api',
      'proxyfleet-controller',
      'proxyfleet-relay',
      'proxyfleet-worker',
    ]);
    const crds = docs.filter((d) => d.kind === 'CustomResourceDefinition');
    expect(crds.map((c) => c.metadata.name).sort()).toEqual([
      'apikeys.proxyfleet.io',
      'proxygateways.proxyfleet.io',
    ]);
    for (const crd of crds) expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
    const without = (await helmTemplate(['--set', 'crds.enabled=false'])) as Doc[];
    expect(without.filter((d) => d.kind === 'CustomResourceDefinition')).toEqual([]);
    const monitoring = ((await helmTemplate(['--set', 'serviceMonitor.enabled=true'])) as Doc[]).map(
      (d) => d.kind,
    );
    expect(monitoring).toEqual(expect.arrayContaining(['ServiceMonitor', 'PodMonitor']));
    expect(((await helmTemplate()) as Doc[]).map((d) => d.kind)).not.toContain('ServiceMonitor');
    // The API pod drains as the gateway's does: its preStop, within its termination grace.
    const api = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'proxyfleet-api')!;
    const apiPod = (
      api as unknown as {
        spec: {
          template: {
            spec: { terminationGracePeriodSeconds: number; containers: Array<{ lifecycle?: unknown }> };
          };
        };
      }
    ).spec.template.spec;
    expect(apiPod.containers[0]!.lifecycle).toEqual({
      preStop: { httpGet: { path: '/prestop', port: 'health' } },
    });
    expect(apiPod.terminationGracePeriodSeconds).toBe(45);
    // The database URL reaches every component from a Secret, never as a literal.
    for (const d of docs.filter((x) => x.kind === 'Deployment')) {
      const env = (
        d as unknown as {
          spec: {
            template: {
              spec: {
                containers: Array<{ env: Array<{ name: string; value?: string; valueFrom?: unknown }> }>;
              };
            };
          };
        }
      ).spec.template.spec.containers[0]!.env;
      const url = env.find((e) => e.name === 'DATABASE_URL')!;
      expect(url.value).toBeUndefined();
      expect(url.valueFrom).toEqual({ secretKeyRef: { name: 'proxyfleet-database', key: 'url' } });
    }
  });

  test('every example ProxyGateway (chart and dev/gateways.yaml) parses with gateway/src/spec.ts and the CRD', async () => {
    const examples = ((await helmTemplate(['--set', 'examples.enabled=true'])) as Doc[]).filter(
      (d) => d.kind === 'ProxyGateway',
    );
    expect(examples.map((e) => e.metadata.name).sort()).toEqual(['advanced', 'basic', 'light']);
    for (const example of examples) {
      const parsed = proxyGatewaySchema.safeParse({ ...example, apiVersion: GATEWAY_CONFIG_API_VERSION });
      expect(parsed.error?.issues ?? []).toEqual([]);
    }
    const dev = await readFile(path.join(REPO_ROOT, 'dev/gateways.yaml'), 'utf8');
    for (const doc of parseAllDocuments(dev))
      expect(proxyGatewaySchema.safeParse(doc.toJSON()).success).toBe(true);
    const out = await fx.kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '-n', 'default', '-f', '-'],
      { input: dev },
    );
    expect(out.match(/serverside-applied \(server dry run\)/g)).toHaveLength(5);
  });

  test("each Deployment's environment is a valid configuration for its entrypoint", async () => {
    const docs = (await helmTemplate()) as Doc[];
    const SECRET_VALUES: Record<string, string> = {
      DATABASE_URL: 'postgresql://proxyfleet@db:5432/proxyfleet',
      PROXYFLEET_ADMIN_TOKEN: 'a'.repeat(32),
      PROXYFLEET_CREDENTIALS_KEY: '0'.repeat(64),
    };
    const loaders: Record<string, (env: Record<string, string>) => unknown> = {
      'proxyfleet-api': loadApiConfig,
      'proxyfleet-worker': loadWorkerConfig,
      'proxyfleet-controller': loadControllerConfig,
      'proxyfleet-relay': loadRelayConfig,
    };
    for (const d of docs.filter((x) => x.kind === 'Deployment')) {
      const container = (
        d as unknown as {
          spec: {
            template: {
              spec: {
                containers: Array<{ command: string[]; env: Array<{ name: string; value?: string }> }>;
              };
            };
          };
        }
      ).spec.template.spec.containers[0]!;
      // Values from the downward API or a Secret get a stand-in of the right form.
      const env = Object.fromEntries(
        container.env.map((e) => [e.name, e.value ?? SECRET_VALUES[e.name] ?? `${d.metadata.name}-0`]),
      );
      expect(() => loaders[d.metadata.name]!(env)).not.toThrow();
      expect(container.command[1]).toMatch(/^(api|worker|controllers|relay)\/src\/main\.ts$/);
    }
  });

  test("the relay's address: its Service's DNS name by default, its environment variables with relay.address=serviceEnv", async () => {
    // The API and (through the controller) the gateways take their changes from the relay's Service.
    const relayUrls = (docs: Doc[]) => ({
      api: envOf(docs, 'proxyfleet-api').find((e) => e.name === 'PROXYFLEET_RELAY_URL')?.value,
      gateways: envOf(docs, 'proxyfleet-controller').find((e) => e.name === 'PROXYFLEET_GATEWAY_RELAY_URL')
        ?.value,
    });
    const dns = `ws://proxyfleet-relay.${RELEASE_NAMESPACE}.svc:8095/changes`;
    expect(relayUrls((await helmTemplate()) as Doc[])).toEqual({ api: dns, gateways: dns });
    expect(relayUrls((await helmTemplate(['--set', 'relay.enabled=false'])) as Doc[])).toEqual({});
    await expect(helmTemplateText(['--set', 'relay.address=dnz'])).rejects.toThrow(/relay\.address/);

    // serviceEnv (a cluster without DNS): the kubelet's service variables, expanded in the env of
    // the API and controller, which run beside the Service with service links on.
    const docs = (await helmTemplate(['--set', 'relay.address=serviceEnv'])) as Doc[];
    const urls = relayUrls(docs);
    const reference = 'ws://$(PROXYFLEET_RELAY_SERVICE_HOST):$(PROXYFLEET_RELAY_SERVICE_PORT_STREAM)/changes';
    expect(urls).toEqual({ api: reference, gateways: reference });
    for (const name of ['proxyfleet-api', 'proxyfleet-controller']) {
      const d = docs.find((x) => x.kind === 'Deployment' && x.metadata.name === name)!;
      expect((d.metadata as { namespace?: string }).namespace).toBe(RELEASE_NAMESPACE);
      expect(podSpec(d).enableServiceLinks).not.toBe(false);
    }
    // What the kubelet makes of it, from the Service as rendered, and what the API then accepts;
    // before the Service exists the reference stays as it is and the API refuses to start.
    const service = docs.find((d) => d.kind === 'Service' && d.metadata.name === 'proxyfleet-relay')!;
    expect((service.metadata as { namespace?: string }).namespace).toBe(RELEASE_NAMESPACE);
    const vars = serviceVariables(service as unknown as RenderedService, '10.96.0.7');
    expect(vars).toMatchObject({
      PROXYFLEET_RELAY_SERVICE_HOST: '10.96.0.7',
      PROXYFLEET_RELAY_SERVICE_PORT_STREAM: '8095',
    });
    expect(expandVariables(reference, vars)).toBe('ws://10.96.0.7:8095/changes');
    const apiEnv = { PROXYFLEET_ADMIN_TOKEN: 'a'.repeat(32), PROXYFLEET_CREDENTIALS_KEY: '0'.repeat(64) };
    expect(
      loadApiConfig({ ...apiEnv, PROXYFLEET_RELAY_URL: expandVariables(reference, vars) })
        .PROXYFLEET_RELAY_URL,
    ).toBe('ws://10.96.0.7:8095/changes');
    expect(() => loadApiConfig({ ...apiEnv, PROXYFLEET_RELAY_URL: expandVariables(reference, {}) })).toThrow(
      /unexpanded Kubernetes variable reference/,
    );
    // Another release name, another Service name, other variables: still the Service's.
    const other = parseAllDocuments(
      (
        await run(
          tool('helm'),
          [
            'template',
            'edge',
            CHART_DIR,
            '-n',
            'fleet',
            ...CHART_TEST_VALUES,
            '--set',
            'relay.address=serviceEnv',
          ],
          { maxBuffer: 20 * 1024 * 1024 },
        )
      ).stdout,
    )
      .map((d) => d.toJSON() as Doc | null)
      .filter((d): d is Doc => d != null);
    const otherService = other.find((d) => d.kind === 'Service' && d.metadata.name.endsWith('-relay'))!;
    const otherUrl = envOf(other, 'edge-proxyfleet-api').find(
      (e) => e.name === 'PROXYFLEET_RELAY_URL',
    )!.value!;
    expect(otherService.metadata.name).toBe('edge-proxyfleet-relay');
    expect(otherUrl).toBe(
      'ws://$(EDGE_PROXYFLEET_RELAY_SERVICE_HOST):$(EDGE_PROXYFLEET_RELAY_SERVICE_PORT_STREAM)/changes',
    );
    expect(
      expandVariables(otherUrl, serviceVariables(otherService as unknown as RenderedService, '10.0.0.9')),
    ).toBe('ws://10.0.0.9:8095/changes');
  });
});

type EnvVar = { name: string; value?: string };
type PodSpec = { enableServiceLinks?: boolean; containers: Array<{ env: EnvVar[] }> };
const podSpec = (d: Doc) => (d as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
const envOf = (docs: Doc[], name: string): EnvVar[] =>
  podSpec(docs.find((d) => d.kind === 'Deployment' && d.metadata.name === name)!).containers[0]!.env;

type RenderedService = {
  metadata: { name: string };
  spec: { ports: Array<{ name?: string; port: number }> };
};
/**
 * The variables the kubelet gives a pod for a Service beside it (pkg/kubelet/envvars/envvars.go,
 * FromServices): {NAME}_SERVICE_HOST, {NAME}_SERVICE_PORT (the first port) and
 * {NAME}_SERVICE_PORT_{PORT NAME} for every named port, names upper-cased with '-' as '_'.
 */
function serviceVariables(service: RenderedService, clusterIp: string): Record<string, string> {
  const envName = (s: string) => s.toUpperCase().replaceAll('-', '_');
  const prefix = envName(service.metadata.name);
  const vars: Record<string, string> = {
    [`${prefix}_SERVICE_HOST`]: clusterIp,
    [`${prefix}_SERVICE_PORT`]: String(service.spec.ports[0]!.port),
  };
  for (const p of service.spec.ports)
    if (p.name) vars[`${prefix}_SERVICE_PORT_${envName(p.name)}`] = String(p.port);
  return vars;
}

/** The kubelet's $(VAR) expansion of an env value: a reference it cannot resolve stays as written. */
const expandVariables = (value: string, vars: Record<string, string>) =>
  value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => vars[name] ?? whole);
