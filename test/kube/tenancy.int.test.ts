// Operator tenancy (docs/adr/0034) on a real kube-apiserver: the operator (as the user bound only to the chart's RBAC)
// is safe with many tenants. One owner per plan endpoint; status from the observed Deployment even
// when an apply fails; objects and Secrets it did not create are never adopted, overwritten or
// deleted; every kind of child is watched; an autoscaled gateway starts at minReplicas; unknown
// fields are refused; the standard controller metric names are exported.
import { expect, test } from '@jest/globals';
import { accountWithBandwidth } from '../fixtures.ts';
import { describeKube } from './describe-kube.ts';
import { eventually } from './env.ts';
import { useOperator } from './operator.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import type { KubeObject } from '../../controllers/src/runtime/kube.ts';
import { RESOURCES } from '../../controllers/src/runtime/resources.ts';
import {
  API_KEY,
  API_KEY_V1ALPHA1,
  PROXY_GATEWAY,
  PROXY_GATEWAY_V1ALPHA1,
} from '../../controllers/src/crds/resources.ts';
import type { ApiKey, ProxyGateway } from '../../controllers/src/crds/types.generated.ts';
import { HANDOFF_FIELD_MANAGER } from '../../controllers/src/proxygateway/reconciler.ts';

type Obj = KubeObject & {
  spec?: Record<string, unknown> & { replicas?: number };
  data?: Record<string, string>;
  status?: Record<string, unknown>;
};
type Condition = { type: string; status: string; reason: string; message: string };

describeKube('operator safety with many tenants (docs/adr/0034)', () => {
  let account: NewAccount;

  const nsYaml = (name: string, accountId?: string) =>
    `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${name}\n` +
    (accountId ? `  labels:\n    proxyfleet.io/account-id: ${accountId}\n` : '');

  const fx = useOperator({
    before: async ({ kube, db }) => {
      account = await accountWithBandwidth(db.pool, { basic: 1e9 });
      for (const ns of ['tenant-a', 'tenant-b', 'shared', 'quota'])
        await kube.apply(nsYaml(ns, ns === 'shared' ? account.id : undefined));
    },
  });

  const spec = (host: string, extra: Record<string, unknown> = {}) => ({
    plan: 'basic',
    port: 12321,
    advertisedHost: host,
    exits: [{ name: 'us', country: 'us' }],
    replicas: { min: 1, max: 1 },
    ...extra,
  });
  const applyPgw = (namespace: string, name: string, s: Record<string, unknown>) =>
    fx.admin.apply(
      PROXY_GATEWAY_V1ALPHA1,
      {
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ProxyGateway',
        metadata: { name, namespace },
        spec: s,
      } as KubeObject,
      { fieldManager: 'test' },
    );
  const condition = async (r: typeof PROXY_GATEWAY, namespace: string, name: string, type: string) => {
    const o = await fx.admin.get<ProxyGateway | ApiKey>(r, namespace, name);
    return (o?.status?.conditions as Condition[] | undefined)?.find((c) => c.type === type);
  };
  const waitCondition = (
    r: typeof PROXY_GATEWAY,
    namespace: string,
    name: string,
    type: string,
    match: (c: Condition) => boolean,
    timeoutMs = 20_000,
  ) =>
    eventually(
      async () => {
        const c = await condition(r, namespace, name, type);
        return c && match(c) ? c : undefined;
      },
      timeoutMs,
      `${namespace}/${name} ${type}`,
    );
  const endpointRow = async () =>
    (
      await fx.db.pool.query<{ host: string; source: string }>(
        "SELECT host, source FROM gateway_endpoints WHERE plan = 'basic'",
      )
    ).rows[0];
  const eventReasons = async (namespace: string, name: string) => {
    const events = await fx.admin.list<KubeObject & { involvedObject?: { name?: string }; reason?: string }>(
      RESOURCES.event,
      { namespace },
    );
    return events.items.filter((e) => e.involvedObject?.name === name).map((e) => e.reason);
  };
  // Events are written after the status they explain: wait for one, do not read once.
  const eventSeen = (namespace: string, name: string, reason: string) =>
    eventually(
      async () => (await eventReasons(namespace, name)).includes(reason),
      20_000,
      `event ${reason} on ${namespace}/${name}`,
    );

  test('finding 1: a second ProxyGateway of a plan cannot take its endpoint (PlanConflict); it takes over within seconds of the owner going', async () => {
    await applyPgw('tenant-a', 'basic', spec('basic.proxy.example.com'));
    await eventually(async () => (await endpointRow())?.source === 'ProxyGateway/tenant-a/basic', 20_000);
    await applyPgw('tenant-b', 'hijack', spec('evil.example.net'));
    const c = await waitCondition(
      PROXY_GATEWAY,
      'tenant-b',
      'hijack',
      'Ready',
      (x) => x.reason === 'PlanConflict',
    );
    expect(c.status).toBe('False');
    expect(c.message).toContain('ProxyGateway/tenant-a/basic');
    await eventSeen('tenant-b', 'hijack', 'PlanConflict');
    expect(await endpointRow()).toEqual({
      host: 'basic.proxy.example.com',
      source: 'ProxyGateway/tenant-a/basic',
    });
    // The owner stays the owner across its own reconciles.
    await applyPgw('tenant-a', 'basic', spec('basic2.proxy.example.com'));
    await eventually(async () => (await endpointRow())?.host === 'basic2.proxy.example.com', 20_000);
    // The owner goes: the waiting gateway takes the plan without minutes of no endpoint.
    await fx.admin.delete(PROXY_GATEWAY, 'tenant-a', 'basic');
    await eventually(
      async () => (await endpointRow())?.source === 'ProxyGateway/tenant-b/hijack',
      15_000,
      'endpoint taken over',
    );
    await waitCondition(PROXY_GATEWAY, 'tenant-b', 'hijack', 'Ready', (x) => x.reason !== 'PlanConflict');
    await fx.admin.delete(PROXY_GATEWAY, 'tenant-b', 'hijack');
    await eventually(async () => (await endpointRow()) === undefined, 15_000, 'endpoint released');
  });

  test('finding 2: a failed apply has its own condition and event; readiness still comes from the Deployment', async () => {
    // An admission policy refusing PodDisruptionBudgets in this namespace makes the PDB apply
    // fail after the Deployment's succeeded.
    await fx.kube.apply(
      [
        'apiVersion: admissionregistration.k8s.io/v1',
        'kind: ValidatingAdmissionPolicy',
        'metadata: { name: deny-pdb }',
        'spec:',
        '  failurePolicy: Fail',
        '  matchConstraints:',
        '    resourceRules:',
        '      - { apiGroups: [policy], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [poddisruptionbudgets] }',
        '  validations:',
        '    - { expression: "false", message: "PodDisruptionBudgets are refused here (test)" }',
        '---',
        'apiVersion: admissionregistration.k8s.io/v1',
        'kind: ValidatingAdmissionPolicyBinding',
        'metadata: { name: deny-pdb }',
        'spec:',
        '  policyName: deny-pdb',
        '  validationActions: [Deny]',
        '  matchResources:',
        '    namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: quota } }',
        '',
      ].join('\n'),
    );
    const probe = {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: { name: 'probe', namespace: 'quota' },
      spec: { maxUnavailable: 1, selector: { matchLabels: { probe: 'x' } } },
    } as KubeObject;
    await eventually(
      async () => {
        try {
          await fx.admin.apply(RESOURCES.pdb, probe, { fieldManager: 'test' });
          await fx.admin.delete(RESOURCES.pdb, 'quota', 'probe');
          return false;
        } catch (err) {
          return /refused here/.test(String(err));
        }
      },
      20_000,
      'admission policy in force',
    );
    await applyPgw('quota', 'gw', spec('quota.example.com', { plan: 'light', port: 10080 }));
    const deployment = await eventually(() => fx.admin.get<Obj>(RESOURCES.deployment, 'quota', 'gw-gateway'));
    // No kubelet here: the test plays the Deployment controller and reports 1/1 ready.
    await fx.admin.apply(
      RESOURCES.deployment,
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'gw-gateway', namespace: 'quota' },
        status: {
          observedGeneration: deployment.metadata.generation,
          replicas: 1,
          readyReplicas: 1,
          updatedReplicas: 1,
          availableReplicas: 1,
        },
      } as KubeObject,
      { fieldManager: 'test-deployment-controller', subresource: 'status' },
    );
    const applied = await waitCondition(PROXY_GATEWAY, 'quota', 'gw', 'Applied', (x) => x.status === 'False');
    expect(applied.reason).toBe('ApplyFailed');
    expect(applied.message).toMatch(/poddisruptionbudgets/);
    const ready = await waitCondition(PROXY_GATEWAY, 'quota', 'gw', 'Ready', (x) => x.status === 'True');
    expect(ready.message).toBe('1/1 gateway pods ready');
    const pgw = (await fx.admin.get<ProxyGateway>(PROXY_GATEWAY, 'quota', 'gw'))!;
    expect(pgw.status?.ready).toBe('1/1');
    await eventSeen('quota', 'gw', 'ApplyFailed');
    // Quota lifted: the PDB is applied and Applied turns True.
    await fx.kube.kubectl(['delete', 'validatingadmissionpolicybinding', 'deny-pdb']);
    // Touch the ProxyGateway so the retry does not wait out the backoff.
    await fx.admin.mergePatch(PROXY_GATEWAY, 'quota', 'gw', { metadata: { annotations: { touched: '1' } } });
    await waitCondition(PROXY_GATEWAY, 'quota', 'gw', 'Applied', (x) => x.status === 'True', 30_000);
    expect(await fx.admin.get(RESOURCES.pdb, 'quota', 'gw-gateway')).toBeDefined();
  });

  test('finding 3: a ConfigMap or HPA of the same name that the operator did not create is neither taken over nor deleted', async () => {
    await fx.kube.apply(
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine-gateway\n  namespace: tenant-a\ndata:\n  owner: someone-else\n',
    );
    await fx.kube.apply(
      [
        'apiVersion: autoscaling/v2',
        'kind: HorizontalPodAutoscaler',
        'metadata:\n  name: mine-gateway\n  namespace: tenant-a',
        'spec:\n  scaleTargetRef: { apiVersion: apps/v1, kind: Deployment, name: other }\n  minReplicas: 1\n  maxReplicas: 2',
        '',
      ].join('\n'),
    );
    await applyPgw('tenant-a', 'mine', spec('mine.example.com', { plan: 'advanced', port: 61236 }));
    const c = await waitCondition(PROXY_GATEWAY, 'tenant-a', 'mine', 'Applied', (x) => x.status === 'False');
    expect(c.reason).toBe('ObjectNotOwned');
    expect(c.message).toContain('ConfigMap mine-gateway');
    await eventSeen('tenant-a', 'mine', 'ObjectNotOwned');
    const cm = (await fx.admin.get<Obj>(RESOURCES.configMap, 'tenant-a', 'mine-gateway'))!;
    expect(cm.data).toEqual({ owner: 'someone-else' });
    expect(cm.metadata.ownerReferences).toBeUndefined();
    // Fixed scaling would delete "its" HPA: not one it did not create.
    const hpa = (await fx.admin.get<Obj>(RESOURCES.hpa, 'tenant-a', 'mine-gateway'))!;
    expect(hpa.metadata.ownerReferences).toBeUndefined();
    expect(hpa.spec?.maxReplicas).toBe(2);
    // Its other children are its own and applied.
    expect(await fx.admin.get(RESOURCES.deployment, 'tenant-a', 'mine-gateway')).toBeDefined();
  });

  const applyKey = (name: string, s: Record<string, unknown>) =>
    fx.admin.apply(
      API_KEY_V1ALPHA1,
      {
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ApiKey',
        metadata: { name, namespace: 'shared' },
        spec: s,
      } as KubeObject,
      { fieldManager: 'test' },
    );

  test('finding 3 (Secrets): an ApiKey naming a Secret it did not create never takes it over nor deletes it; two ApiKeys cannot share one', async () => {
    await fx.kube.apply(
      'apiVersion: v1\nkind: Secret\nmetadata:\n  name: database-credentials\n  namespace: shared\nstringData:\n  url: postgresql://app:hunter2@db/app\n',
    );
    await applyKey('grab', { accountId: account.id, name: 'grab', secretName: 'database-credentials' });
    const c = await waitCondition(API_KEY, 'shared', 'grab', 'Ready', (x) => x.reason === 'SecretNotOwned');
    expect(c.status).toBe('False');
    const intact = async () => {
      const s = (await fx.admin.get<Obj>(RESOURCES.secret, 'shared', 'database-credentials'))!;
      expect(Buffer.from(s.data!.url!, 'base64').toString()).toBe('postgresql://app:hunter2@db/app');
      expect(Object.keys(s.data!)).toEqual(['url']);
      expect(s.metadata.ownerReferences).toBeUndefined();
    };
    await intact();
    await applyKey('grab', {
      accountId: account.id,
      name: 'grab',
      secretName: 'database-credentials',
      revoked: true,
    });
    await waitCondition(API_KEY, 'shared', 'grab', 'Ready', (x) => x.reason === 'Revoked');
    await intact();
    await fx.admin.delete(API_KEY, 'shared', 'grab');
    await eventually(async () => (await fx.admin.get(API_KEY, 'shared', 'grab')) === undefined, 20_000);
    await intact();

    // Two ApiKeys, one secretName: the first keeps its key, the second is refused.
    await applyKey('first', { accountId: account.id, name: 'first', secretName: 'shared-key' });
    await waitCondition(API_KEY, 'shared', 'first', 'Ready', (x) => x.status === 'True');
    const before = (await fx.admin.get<Obj>(RESOURCES.secret, 'shared', 'shared-key'))!.data!.apiKey;
    await applyKey('second', { accountId: account.id, name: 'second', secretName: 'shared-key' });
    const second = await waitCondition(
      API_KEY,
      'shared',
      'second',
      'Ready',
      (x) => x.reason === 'SecretNotOwned',
    );
    expect(second.message).toContain('ApiKey first');
    expect((await fx.admin.get<Obj>(RESOURCES.secret, 'shared', 'shared-key'))!.data!.apiKey).toBe(before);
    await fx.admin.delete(API_KEY, 'shared', 'second');
    await eventually(async () => (await fx.admin.get(API_KEY, 'shared', 'second')) === undefined, 20_000);
    expect((await fx.admin.get<Obj>(RESOURCES.secret, 'shared', 'shared-key'))!.data!.apiKey).toBe(before);
    await waitCondition(API_KEY, 'shared', 'first', 'Ready', (x) => x.status === 'True');
  });

  test('finding 5: a deleted ConfigMap or PodDisruptionBudget is restored at once (watched, not left to the resync)', async () => {
    // The test operator resyncs every 60 s: restoring within 10 s proves the watch.
    await applyPgw('tenant-b', 'watched', spec('watched.example.com', { plan: 'mobile', port: 10081 }));
    const cm = await eventually(() => fx.admin.get<Obj>(RESOURCES.configMap, 'tenant-b', 'watched-gateway'));
    await eventually(() => fx.admin.get<Obj>(RESOURCES.pdb, 'tenant-b', 'watched-gateway'));
    await fx.admin.delete(RESOURCES.configMap, 'tenant-b', 'watched-gateway');
    const restored = await eventually(
      async () => {
        const o = await fx.admin.get<Obj>(RESOURCES.configMap, 'tenant-b', 'watched-gateway');
        return o && o.metadata.uid !== cm.metadata.uid ? o : undefined;
      },
      10_000,
      'ConfigMap restored',
    );
    expect(restored.data).toEqual(cm.data);
    await fx.admin.delete(RESOURCES.pdb, 'tenant-b', 'watched-gateway');
    await eventually(
      () => fx.admin.get(RESOURCES.pdb, 'tenant-b', 'watched-gateway'),
      10_000,
      'PDB restored',
    );
    // Drift in a ConfigMap's content is repaired too.
    await fx.admin.mergePatch(RESOURCES.configMap, 'tenant-b', 'watched-gateway', {
      data: { 'gateway.yaml': 'tampered: true\n' },
    });
    await eventually(
      async () =>
        (await fx.admin.get<Obj>(RESOURCES.configMap, 'tenant-b', 'watched-gateway'))?.data?.[
          'gateway.yaml'
        ] === cm.data?.['gateway.yaml'],
      10_000,
      'ConfigMap content repaired',
    );
  });

  test('finding 4: an upstream password goes into an owned Secret the pod mounts, never into the ConfigMap, status or events', async () => {
    await applyPgw(
      'tenant-a',
      'chained',
      spec('chained.example.com', {
        plan: 'light',
        port: 10080,
        exits: [{ name: 'de', country: 'de', upstream: { url: 'http://user:s3cretPW@up.internal:3128' } }],
      }),
    );
    const cm = await eventually(() => fx.admin.get<Obj>(RESOURCES.configMap, 'tenant-a', 'chained-gateway'));
    expect(JSON.stringify(cm)).not.toContain('s3cretPW');
    expect(cm.data?.['gateway.yaml']).toContain('urlFile: /etc/proxyfleet-upstreams/exit-0');
    const secret = await eventually(() =>
      fx.admin.get<Obj>(RESOURCES.secret, 'tenant-a', 'chained-gateway-upstreams'),
    );
    expect(Buffer.from(secret.data!['exit-0']!, 'base64').toString()).toBe(
      'http://user:s3cretPW@up.internal:3128',
    );
    expect(secret.metadata.ownerReferences?.[0]?.kind).toBe('ProxyGateway');
    await waitCondition(PROXY_GATEWAY, 'tenant-a', 'chained', 'Applied', (x) => x.status === 'True');
    const pgw = await fx.admin.get<Obj>(PROXY_GATEWAY, 'tenant-a', 'chained');
    expect(JSON.stringify(pgw?.status)).not.toContain('s3cretPW');
    const events = await fx.admin.list(RESOURCES.event, { namespace: 'tenant-a' });
    expect(JSON.stringify(events.items)).not.toContain('s3cretPW');
  });

  test('finding 7: an autoscaled gateway starts at minReplicas, and the HPA (not the operator) owns replicas', async () => {
    await applyPgw(
      'tenant-b',
      'scaled',
      spec('scaled.example.com', { plan: 'datacenter', port: 10082, replicas: { min: 3, max: 6 } }),
    );
    const d = await eventually(async () => {
      const o = await fx.admin.get<
        Obj & {
          metadata: {
            managedFields?: Array<{ manager: string; fieldsV1?: Record<string, Record<string, unknown>> }>;
          };
        }
      >(RESOURCES.deployment, 'tenant-b', 'scaled-gateway');
      // Wait until the operator has given replicas away.
      const ours = o?.metadata.managedFields?.find((f) => f.manager === 'proxyfleet-operator');
      return o && ours && ours.fieldsV1?.['f:spec']?.['f:replicas'] === undefined ? o : undefined;
    });
    expect(d.spec?.replicas).toBe(3);
    const handoff = d.metadata.managedFields?.find((f) => f.manager === HANDOFF_FIELD_MANAGER);
    expect(handoff?.fieldsV1?.['f:spec']?.['f:replicas']).toBeDefined();
    await eventually(() => fx.admin.get(RESOURCES.hpa, 'tenant-b', 'scaled-gateway'), 20_000, 'hpa');
    // Later reconciles leave it at min (no reset to 1).
    await applyPgw(
      'tenant-b',
      'scaled',
      spec('scaled2.example.com', { plan: 'datacenter', port: 10082, replicas: { min: 3, max: 6 } }),
    );
    await eventually(
      async () =>
        (await fx.admin.get<Obj & { status?: { endpoint?: string } }>(PROXY_GATEWAY, 'tenant-b', 'scaled'))
          ?.status?.endpoint === 'scaled2.example.com:10082',
    );
    expect(
      (await fx.admin.get<Obj>(RESOURCES.deployment, 'tenant-b', 'scaled-gateway'))?.spec?.replicas,
    ).toBe(3);
  });

  test('finding 10: unknown fields in ProxyGateway and ApiKey specs are refused, and the operator writes with fieldValidation=Strict', async () => {
    // Our client (the operator's, and this admin's) sends fieldValidation=Strict on every write:
    // create, update and merge patch refuse unknown fields instead of pruning them silently.
    const typo = {
      apiVersion: 'proxyfleet.io/v1alpha1',
      kind: 'ProxyGateway',
      metadata: { name: 'typo', namespace: 'tenant-b' },
      spec: { ...spec('typo.example.com'), replica: { min: 2, max: 2 } },
    } as KubeObject;
    await expect(fx.admin.create(PROXY_GATEWAY_V1ALPHA1, typo)).rejects.toThrow(
      /unknown field "spec.replica"/,
    );
    await expect(
      fx.admin.create(RESOURCES.configMap, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'strict', namespace: 'tenant-b' },
        dataa: { x: '1' },
      } as KubeObject),
    ).rejects.toThrow(/unknown field "dataa"/);
    await expect(
      fx.admin.mergePatch(PROXY_GATEWAY, 'tenant-b', 'watched', { spec: { replica: { min: 2, max: 2 } } }),
    ).rejects.toThrow(/unknown field "spec.replica"/);
    // Server-side apply refuses unknown fields in any case.
    await expect(
      applyPgw('tenant-b', 'typo', { ...spec('typo.example.com'), replica: { min: 2, max: 2 } }),
    ).rejects.toThrow(/spec\.replica: field not declared in schema/);
    await expect(
      applyKey('typo', { accountId: account.id, name: 'typo', secretName: 'typo', revoke: true }),
    ).rejects.toThrow(/spec\.revoke: field not declared in schema/);
    await expect(
      fx.admin.apply(
        RESOURCES.configMap,
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'strict', namespace: 'tenant-b' },
          dataa: { x: '1' },
        } as KubeObject,
        { fieldManager: 'test' },
      ),
    ).rejects.toThrow(/dataa: field not declared in schema/);
    // kubectl (strict by default) refuses the same typo.
    await expect(
      fx.kube.apply(
        `apiVersion: proxyfleet.io/v1alpha1\nkind: ProxyGateway\nmetadata:\n  name: typo\n  namespace: tenant-b\nspec:\n  plan: basic\n  port: 12321\n  advertisedHost: t.example.com\n  exits: [{ name: us, country: us }]\n  replicas: { min: 1, max: 1 }\n  bogus: 1\n`,
      ),
    ).rejects.toThrow(/spec\.bogus: field not declared in schema/);
  });

  test('the standard controller-runtime and client-go metric names are exported beside ours', async () => {
    const text = await fx.operator.registry.metrics();
    // Labels as controller-runtime and client-go name them (the registry adds component="controller").
    for (const series of [
      /^controller_runtime_reconcile_total\{controller="proxygateway",result="success".*\} [1-9]/m,
      /^controller_runtime_reconcile_total\{controller="proxygateway",result="error".*\} [1-9]/m,
      /^controller_runtime_reconcile_errors_total\{controller="proxygateway".*\} [1-9]/m,
      /^controller_runtime_reconcile_time_seconds_bucket\{.*controller="apikey"/m,
      /^workqueue_depth\{name="proxygateway".*\} \d/m,
      /^workqueue_adds_total\{name="apikey".*\} [1-9]/m,
      /^workqueue_queue_duration_seconds_bucket\{.*name="proxygateway"/m,
      /^workqueue_retries_total\{name="proxygateway".*\} [1-9]/m,
      /^rest_client_requests_total\{code="200",method="PATCH",host="127\.0\.0\.1:\d+".*\} [1-9]/m,
      /^proxyfleet_controller_reconcile_duration_seconds_bucket\{/m,
    ]) {
      expect(text).toMatch(series);
    }
  });
});
