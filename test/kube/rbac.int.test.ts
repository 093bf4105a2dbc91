// The operator's least privilege (docs/adr/0034) and the platform conventions, proven on a real kube-apiserver: the chart is
// installed with `helm install` (namespaced mode, then cluster-wide mode as a second release),
// the operator runs with a token of the chart's own ServiceAccount, and `kubectl auth can-i --as`
// shows what that ServiceAccount cannot do. Also: aggregated ClusterRoles for namespace users, the
// operator's PodDisruptionBudget and NetworkPolicy, and the gateways' log level apart from the
// controller's.
import { execFile } from 'node:child_process';
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../db.ts';
import { accountWithBandwidth } from '../fixtures.ts';
import { describeKube } from './describe-kube.ts';
import {
  CHART_DIR,
  CHART_TEST_VALUES,
  eventually,
  helmTemplate,
  kubeconfigYaml,
  RELEASE_NAMESPACE,
  startKube,
  tool,
  type KubeEnv,
} from './env.ts';
import { createTestOperator, kubeClientFor, TEST_GATEWAY_OPTIONS } from './operator.ts';
import type { Operator } from '../../controllers/src/operator.ts';
import { loadControllerConfig } from '../../controllers/src/config.ts';
import type { KubeClient, KubeObject } from '../../controllers/src/runtime/kube.ts';
import { RESOURCES } from '../../controllers/src/runtime/resources.ts';
import {
  API_KEY,
  API_KEY_V1ALPHA1,
  PROXY_GATEWAY,
  PROXY_GATEWAY_V1ALPHA1,
} from '../../controllers/src/crds/resources.ts';
import type { ApiKey, ProxyGateway } from '../../controllers/src/crds/types.generated.ts';

const run = promisify(execFile);
const SA = `system:serviceaccount:${RELEASE_NAMESPACE}:proxyfleet-controller`;
const CLUSTER_RELEASE_NS = 'pfc-system';
const CLUSTER_SA = `system:serviceaccount:${CLUSTER_RELEASE_NS}:pfc-proxyfleet-controller`;

type Doc = { kind: string; metadata: { name: string; labels?: Record<string, string> } } & Record<
  string,
  unknown
>;

describeKube('chart RBAC installed with helm: least privilege, namespaced mode, conventions', () => {
  let kube: KubeEnv;
  let db: TestDatabase;
  let dir: string;
  let operator: Operator | undefined;
  let admin: KubeClient;
  let accountId: string;

  const helm = async (args: string[]) =>
    (await run(tool('helm'), [...args, `--kubeconfig=${kube.adminKubeconfig}`], { maxBuffer: 20 << 20 }))
      .stdout;

  /** `kubectl auth can-i` as someone: true for yes, false for no (exit 1), an error otherwise. */
  const canI = async (as: string, args: string[]): Promise<boolean> => {
    try {
      const out = await kube.kubectl(['auth', 'can-i', `--as=${as}`, ...args]);
      return out.trim() === 'yes';
    } catch (err) {
      // kubectl may print a warning (e.g. "namespaces is not namespace scoped") before the answer.
      if (/exited 1:[\s\S]*\bno\s*$/.test(String(err))) return false;
      throw err;
    }
  };

  beforeAll(async () => {
    [kube, db] = await Promise.all([startKube({ rbac: false }), createTestDatabase()]);
    admin = kubeClientFor(kube.adminKubeconfig);
    dir = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-rbac-'));
    const account = await accountWithBandwidth(db.pool, { basic: 1e9 });
    for (const ns of ['team-a', 'team-b', CLUSTER_RELEASE_NS])
      await kube.apply(
        `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${ns}\n  labels:\n    proxyfleet.io/account-id: ${account.id}\n`,
      );
    accountId = account.id;
    // Namespaced install: the CRDs are already there (startKube applied them).
    await helm([
      'install',
      'proxyfleet',
      CHART_DIR,
      '--namespace',
      RELEASE_NAMESPACE,
      ...CHART_TEST_VALUES,
      '--set',
      'crds.enabled=false',
      '--set',
      'controller.watchNamespaces={team-a}',
    ]);
    // Cluster-wide install, a second release.
    await helm([
      'install',
      'pfc',
      CHART_DIR,
      '--namespace',
      CLUSTER_RELEASE_NS,
      ...CHART_TEST_VALUES,
      '--set',
      'crds.enabled=false',
      '--set',
      'rbac.aggregateToDefaultRoles=false',
    ]);
  }, 180_000);

  afterAll(async () => {
    await operator?.stop();
    await kube?.stop();
    await db?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('namespaced mode: Roles only in the watched namespace (nodes: read only); no Secret, HPA or CR access elsewhere', async () => {
    const clusterRoles = JSON.parse(await kube.kubectl(['get', 'clusterroles', '-o', 'json'])) as {
      items: Doc[];
    };
    expect(clusterRoles.items.map((r) => r.metadata.name)).not.toContain('proxyfleet-controller');
    // What it may do in team-a.
    expect(await canI(SA, ['get', 'secrets', '-n', 'team-a'])).toBe(true);
    expect(await canI(SA, ['create', 'secrets', '-n', 'team-a'])).toBe(true);
    expect(await canI(SA, ['list', 'proxygateways.proxyfleet.io', '-n', 'team-a'])).toBe(true);
    expect(await canI(SA, ['get', 'namespaces/team-a', '-n', 'team-a'])).toBe(true);
    // Gateway NetworkPolicies: watched like every child, deleted when off or hostNetwork.
    for (const verb of ['watch', 'patch', 'delete'])
      expect(await canI(SA, [verb, 'networkpolicies.networking.k8s.io', '-n', 'team-a'])).toBe(true);
    // What it may not.
    for (const ns of ['kube-system', 'default', 'team-b', RELEASE_NAMESPACE]) {
      expect(await canI(SA, ['get', 'secrets', '-n', ns])).toBe(false);
      expect(await canI(SA, ['delete', 'secrets', '-n', ns])).toBe(false);
      expect(await canI(SA, ['delete', 'horizontalpodautoscalers.autoscaling', '-n', ns])).toBe(false);
      expect(await canI(SA, ['delete', 'networkpolicies.networking.k8s.io', '-n', ns])).toBe(false);
      expect(await canI(SA, ['patch', 'configmaps', '-n', ns])).toBe(false);
    }
    expect(await canI(SA, ['list', 'secrets', '-n', 'team-a'])).toBe(false);
    expect(await canI(SA, ['watch', 'secrets', '-n', 'team-a'])).toBe(false);
    expect(await canI(SA, ['get', 'secrets', '--all-namespaces'])).toBe(false);
    expect(await canI(SA, ['list', 'proxygateways.proxyfleet.io', '--all-namespaces'])).toBe(false);
    expect(await canI(SA, ['get', 'namespaces/team-b', '-n', 'team-b'])).toBe(false);
    expect(await canI(SA, ['update', 'leases.coordination.k8s.io', '-n', 'kube-system'])).toBe(false);
    expect(await canI(SA, ['update', 'leases.coordination.k8s.io', '-n', RELEASE_NAMESPACE])).toBe(true);
    // The conversion webhook's certificate: its own Secret by name, and caBundle of the two CRDs only.
    const webhookSecret = 'secrets/proxyfleet-controller-webhook';
    expect(await canI(SA, ['patch', webhookSecret, '-n', RELEASE_NAMESPACE])).toBe(true);
    expect(await canI(SA, ['get', 'secrets/other', '-n', RELEASE_NAMESPACE])).toBe(false);
    expect(await canI(SA, ['patch', webhookSecret, '-n', 'team-b'])).toBe(false);
    const crd = (name: string) => `customresourcedefinitions.apiextensions.k8s.io/${name}`;
    for (const sa of [SA, CLUSTER_SA]) {
      expect(await canI(sa, ['patch', crd('apikeys.proxyfleet.io')])).toBe(true);
      expect(await canI(sa, ['patch', crd('proxygateways.proxyfleet.io')])).toBe(true);
      expect(await canI(sa, ['patch', crd('certificates.cert-manager.io')])).toBe(false);
      expect(await canI(sa, ['delete', crd('apikeys.proxyfleet.io')])).toBe(false);
      expect(await canI(sa, ['list', 'customresourcedefinitions.apiextensions.k8s.io'])).toBe(false);
    }
    // Nodes, read only (hostNetwork gateways' placement): the one cluster-scoped grant of this mode.
    for (const sa of [SA, CLUSTER_SA]) {
      expect(await canI(sa, ['list', 'nodes'])).toBe(true);
      expect(await canI(sa, ['watch', 'nodes'])).toBe(true);
      expect(await canI(sa, ['patch', 'nodes'])).toBe(false);
      expect(await canI(sa, ['delete', 'nodes'])).toBe(false);
    }
  });

  test('cluster-wide mode: no delete, list or watch on Secrets anywhere; no cluster-wide ConfigMap delete', async () => {
    expect(await canI(CLUSTER_SA, ['delete', 'secrets', '--all-namespaces'])).toBe(false);
    expect(await canI(CLUSTER_SA, ['delete', 'secrets', '-n', 'kube-system'])).toBe(false);
    expect(await canI(CLUSTER_SA, ['list', 'secrets', '--all-namespaces'])).toBe(false);
    expect(await canI(CLUSTER_SA, ['watch', 'secrets', '-n', 'default'])).toBe(false);
    expect(await canI(CLUSTER_SA, ['delete', 'configmaps', '-n', 'kube-system'])).toBe(false);
    expect(await canI(CLUSTER_SA, ['delete', 'deployments.apps', '-n', 'kube-system'])).toBe(false);
    expect(await canI(CLUSTER_SA, ['list', 'namespaces'])).toBe(false);
    expect(await canI(CLUSTER_SA, ['list', 'proxygateways.proxyfleet.io', '--all-namespaces'])).toBe(true);
    expect(await canI(CLUSTER_SA, ['watch', 'networkpolicies.networking.k8s.io', '--all-namespaces'])).toBe(
      true,
    );
  });

  test("the operator runs with the chart's ServiceAccount token in namespaced mode, and leaves other namespaces alone", async () => {
    const { stdout: token } = await run(tool('kubectl'), [
      `--kubeconfig=${kube.adminKubeconfig}`,
      'create',
      'token',
      'proxyfleet-controller',
      '-n',
      RELEASE_NAMESPACE,
      '--duration=1h',
    ]);
    const kubeconfig = path.join(dir, 'sa.kubeconfig');
    await writeFile(kubeconfig, kubeconfigYaml(kube.server, token.trim(), 'proxyfleet-controller'));
    operator = createTestOperator({
      kubeconfig,
      pool: db.pool,
      leaseNamespace: RELEASE_NAMESPACE,
      identity: 'sa-test',
      overrides: {
        watchNamespaces: ['team-a'],
        gateway: { ...TEST_GATEWAY_OPTIONS, networkPolicy: { egress: [], clusterCidrs: [], healthFrom: [] } },
      },
    });
    await operator.start();
    const pgw = (namespace: string) =>
      admin.apply(
        PROXY_GATEWAY_V1ALPHA1,
        {
          apiVersion: 'proxyfleet.io/v1alpha1',
          kind: 'ProxyGateway',
          metadata: { name: 'gw', namespace },
          spec: {
            plan: namespace === 'team-a' ? 'basic' : 'light',
            port: namespace === 'team-a' ? 12321 : 10080,
            advertisedHost: `${namespace}.example.com`,
            exits: [{ name: 'us', country: 'us' }],
            replicas: { min: 2, max: 4 },
          },
        } as KubeObject,
        { fieldManager: 'test' },
      );
    const key = (namespace: string) =>
      admin.apply(
        API_KEY_V1ALPHA1,
        {
          apiVersion: 'proxyfleet.io/v1alpha1',
          kind: 'ApiKey',
          metadata: { name: 'ci', namespace },
          spec: { accountId, name: `ci-${namespace}`, secretName: 'ci-key' },
        } as KubeObject,
        { fieldManager: 'test' },
      );
    await Promise.all([pgw('team-a'), pgw('team-b'), key('team-a'), key('team-b')]);
    await eventually(
      async () => {
        const gw = await admin.get<ProxyGateway>(PROXY_GATEWAY, 'team-a', 'gw');
        return gw?.status?.conditions?.find((c) => c.type === 'Applied' && c.status === 'True');
      },
      30_000,
      'team-a ProxyGateway applied under the ServiceAccount',
    );
    for (const r of [
      RESOURCES.configMap,
      RESOURCES.deployment,
      RESOURCES.service,
      RESOURCES.pdb,
      RESOURCES.hpa,
      RESOURCES.networkPolicy,
    ])
      expect(await admin.get(r, 'team-a', 'gw-gateway')).toBeDefined();
    await eventually(
      async () => {
        const ak = await admin.get<ApiKey>(API_KEY, 'team-a', 'ci');
        return ak?.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'True');
      },
      30_000,
      'team-a ApiKey ready under the ServiceAccount',
    );
    expect(await admin.get(RESOURCES.secret, 'team-a', 'ci-key')).toBeDefined();
    // team-b is not watched: nothing done there.
    expect((await admin.get<ProxyGateway>(PROXY_GATEWAY, 'team-b', 'gw'))?.status).toBeUndefined();
    expect(await admin.get(RESOURCES.deployment, 'team-b', 'gw-gateway')).toBeUndefined();
    expect(await admin.get(RESOURCES.secret, 'team-b', 'ci-key')).toBeUndefined();
    // Revoking deletes the key's own Secret (the namespaced Role allows delete in team-a).
    await admin.apply(
      API_KEY_V1ALPHA1,
      {
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ApiKey',
        metadata: { name: 'ci', namespace: 'team-a' },
        spec: { accountId, name: 'ci-team-a', secretName: 'ci-key', revoked: true },
      } as KubeObject,
      { fieldManager: 'test' },
    );
    await eventually(
      async () => (await admin.get(RESOURCES.secret, 'team-a', 'ci-key')) === undefined,
      20_000,
      'revoked key Secret deleted',
    );
  });

  test('aggregated ClusterRoles give namespace admins/editors manage and viewers read on the CRDs', async () => {
    const docs = (await helmTemplate()) as Doc[];
    const byName = (n: string) => docs.find((d) => d.kind === 'ClusterRole' && d.metadata.name === n)!;
    expect(byName('proxyfleet-edit').metadata.labels).toMatchObject({
      'rbac.authorization.k8s.io/aggregate-to-admin': 'true',
      'rbac.authorization.k8s.io/aggregate-to-edit': 'true',
    });
    expect(byName('proxyfleet-view').metadata.labels).toMatchObject({
      'rbac.authorization.k8s.io/aggregate-to-view': 'true',
    });
    // The API server's bootstrap edit/view roles select exactly these labels (the controller
    // manager, absent here, fills in their rules).
    const edit = JSON.parse(await kube.kubectl(['get', 'clusterrole', 'edit', '-o', 'json'])) as {
      aggregationRule: { clusterRoleSelectors: Array<{ matchLabels: Record<string, string> }> };
    };
    expect(edit.aggregationRule.clusterRoleSelectors).toContainEqual({
      matchLabels: { 'rbac.authorization.k8s.io/aggregate-to-edit': 'true' },
    });
    // The installed roles grant what they say: bind them as a namespace user would get them.
    await kube.apply(
      [
        'apiVersion: rbac.authorization.k8s.io/v1',
        'kind: RoleBinding',
        'metadata: { name: viewer, namespace: team-a }',
        'roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: proxyfleet-view }',
        'subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer }]',
        '---',
        'apiVersion: rbac.authorization.k8s.io/v1',
        'kind: RoleBinding',
        'metadata: { name: editor, namespace: team-a }',
        'roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: proxyfleet-edit }',
        'subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: editor }]',
        '',
      ].join('\n'),
    );
    expect(await canI('viewer', ['list', 'apikeys.proxyfleet.io', '-n', 'team-a'])).toBe(true);
    expect(await canI('viewer', ['create', 'apikeys.proxyfleet.io', '-n', 'team-a'])).toBe(false);
    expect(await canI('editor', ['create', 'proxygateways.proxyfleet.io', '-n', 'team-a'])).toBe(true);
    expect(
      await canI('editor', ['patch', 'proxygateways.proxyfleet.io', '--subresource=status', '-n', 'team-a']),
    ).toBe(false);
    expect(await canI('editor', ['create', 'proxygateways.proxyfleet.io', '-n', 'team-b'])).toBe(false);
    // Off by value (the cluster-wide release turned them off).
    const off = (await helmTemplate(['--set', 'rbac.aggregateToDefaultRoles=false'])) as Doc[];
    expect(off.filter((d) => d.kind === 'ClusterRole').map((d) => d.metadata.name)).toEqual([
      'proxyfleet-controller',
      'proxyfleet-controller-nodes',
      'proxyfleet-controller-webhook',
    ]);
  });

  test("the operator's own PodDisruptionBudget and NetworkPolicy are installed, and values turn them off", async () => {
    const pdb = await admin.get<KubeObject & { spec: Record<string, unknown> }>(
      RESOURCES.pdb,
      RELEASE_NAMESPACE,
      'proxyfleet-controller',
    );
    expect(pdb?.spec.maxUnavailable).toBe(1);
    const np = JSON.parse(
      await kube.kubectl([
        'get',
        'networkpolicy',
        'proxyfleet-controller',
        '-n',
        RELEASE_NAMESPACE,
        '-o',
        'json',
      ]),
    ) as { spec: { policyTypes: string[]; ingress: Array<{ ports: Array<{ port: number }> }> } };
    expect(np.spec.policyTypes).toEqual(['Ingress']);
    // Health/metrics, and the conversion webhook the API server calls.
    expect(np.spec.ingress.flatMap((i) => i.ports.map((p) => p.port))).toEqual([9092, 9443]);
    const off = (await helmTemplate([
      '--set',
      'controller.podDisruptionBudget.enabled=false',
      '--set',
      'controller.networkPolicy.enabled=false',
    ])) as Doc[];
    // The API has its own budget (api-scaling.yaml), the api, worker and relay their own policies
    // (networkPolicy.enabled): only the controller's must be gone.
    const controllerKinds = off.filter((d) => d.metadata.name === 'proxyfleet-controller').map((d) => d.kind);
    expect(controllerKinds).toContain('Deployment');
    expect(controllerKinds).not.toContain('PodDisruptionBudget');
    expect(controllerKinds).not.toContain('NetworkPolicy');
  });

  test("finding 6: the controller's log level is not the gateways' (debugging the controller rolls no gateway)", async () => {
    const docs = (await helmTemplate(['--set', 'controller.logLevel=debug'])) as Doc[];
    const controller = docs.find(
      (d) => d.kind === 'Deployment' && d.metadata.name === 'proxyfleet-controller',
    ) as unknown as {
      spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
    };
    const env = Object.fromEntries(
      controller.spec.template.spec.containers[0]!.env.map((e) => [e.name, e.value]),
    );
    expect(env.PROXYFLEET_LOG_LEVEL).toBe('debug');
    expect(env.PROXYFLEET_GATEWAY_LOG_LEVEL).toBe('info');
    const config = loadControllerConfig({
      DATABASE_URL: 'postgresql://x@db/x',
      PROXYFLEET_LOG_LEVEL: 'debug',
    });
    expect(config.PROXYFLEET_GATEWAY_LOG_LEVEL).toBe('info');
  });
});
