// Pausing reconciliation (runtime/pause.ts) on a real kube-apiserver with the operator as the
// chart's least-privileged user: `proxyfleet.io/reconcile: paused` on a ProxyGateway or ApiKey
// stops the operator acting on it (a deleted child stays deleted, a rotation waits), reports a
// Paused condition, an Event and the Paused printer column; removing it resumes; deletion of a
// paused object still cleans up. What "nothing happens" means is shown against a control object
// changed right after the paused one on the same controller's queue: once the control's change
// is done, the paused one's was handled too.
import { expect, test } from '@jest/globals';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { describeKube } from '#test/kube/describe-kube.ts';
import { eventually } from '#test/kube/env.ts';
import { useOperator } from '#test/kube/operator.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import type { KubeObject, Resource } from './runtime/kube.ts';
import { RESOURCES } from './runtime/resources.ts';
import { API_KEY, PROXY_GATEWAY } from './crds/resources.ts';
import type { ApiKey, ProxyGateway } from './crds/types.generated.ts';

const NS = 'pausing';

type Obj = KubeObject & { status?: { conditions?: Array<{ type: string; status: string; reason: string }> } };
interface Event extends KubeObject {
  reason: string;
  involvedObject: { kind: string; name: string };
}

describeKube('pausing reconciliation with proxyfleet.io/reconcile: paused', () => {
  let account: NewAccount;
  const fx = useOperator({
    before: async ({ kube, db }) => {
      account = await accountWithBandwidth(db.pool, { basic: 1e9 });
      await kube.apply(
        `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${NS}\n  labels:\n    proxyfleet.io/account-id: ${account.id}\n`,
      );
    },
  });

  const apply = (r: Resource, kind: string, name: string, spec: Record<string, unknown>) =>
    fx.admin.apply(
      { ...r, version: 'v1alpha1' },
      { apiVersion: 'proxyfleet.io/v1alpha1', kind, metadata: { name, namespace: NS }, spec } as KubeObject,
      { fieldManager: 'test' },
    );
  const gateway = (name: string, port: number, exits = [{ name: 'us', country: 'us' }]) =>
    apply(PROXY_GATEWAY, 'ProxyGateway', name, {
      plan: name === 'control' ? 'light' : 'basic',
      port,
      advertisedHost: `${name}.proxy.example.com`,
      exits,
      replicas: { min: 2, max: 2 },
    });
  const annotate = (r: Resource, name: string, value: string | null) =>
    fx.admin.mergePatch(r, NS, name, { metadata: { annotations: { 'proxyfleet.io/reconcile': value } } });
  const condition = async (r: Resource, name: string, type: string) =>
    (await fx.admin.get<Obj>(r, NS, name))?.status?.conditions?.find((c) => c.type === type);
  const waitCondition = (r: Resource, name: string, type: string, status: string, reason?: string) =>
    eventually(
      async () => {
        const c = await condition(r, name, type);
        return c?.status === status && (reason === undefined || c.reason === reason) ? c : undefined;
      },
      20_000,
      `${name} ${type}=${status}`,
    );
  const eventReasons = async (kind: string, name: string) =>
    (await fx.admin.list<Event>(RESOURCES.event, { namespace: NS })).items
      .filter((e) => e.involvedObject.kind === kind && e.involvedObject.name === name)
      .map((e) => e.reason);
  const configOf = (name: string) =>
    fx.admin.get<KubeObject & { data: Record<string, string> }>(RESOURCES.configMap, NS, `${name}-gateway`);

  test('a paused ProxyGateway keeps its children as they are, shows Paused, and resumes when the annotation goes', async () => {
    await gateway('held', 12321);
    await gateway('control', 10080);
    await eventually(() => configOf('held'), 20_000, 'held ConfigMap');
    await eventually(() => configOf('control'), 20_000, 'control ConfigMap');

    await annotate(PROXY_GATEWAY, 'held', 'paused');
    const paused = await waitCondition(PROXY_GATEWAY, 'held', 'Paused', 'True', 'ReconcilePaused');
    expect(paused).toBeDefined();
    expect(await eventReasons('ProxyGateway', 'held')).toContain('ReconcilePaused');
    // The printer column: kubectl get pgw says which gateway is paused.
    const table = await fx.kube.kubectl(['get', 'pgw', '-n', NS]);
    const header = table.split('\n')[0]!.split(/\s+/);
    const row = (name: string) =>
      table
        .split('\n')
        .find((l) => l.startsWith(`${name} `))!
        .split(/\s+/);
    expect(header).toContain('PAUSED');
    expect(row('held')[header.indexOf('PAUSED')]).toBe('True');
    // The other gateway never paused: no Paused condition, an empty column.
    expect(await condition(PROXY_GATEWAY, 'control', 'Paused')).toBeUndefined();

    // While paused: a spec change and a deleted child are left alone.
    await gateway('held', 12321, [
      { name: 'us', country: 'us' },
      { name: 'de', country: 'de' },
    ]);
    await fx.admin.delete(RESOURCES.configMap, NS, 'held-gateway');
    await fx.admin.delete(RESOURCES.configMap, NS, 'control-gateway');
    await eventually(() => configOf('control'), 20_000, 'control ConfigMap recreated');
    expect(await configOf('held')).toBeUndefined();
    expect((await fx.admin.get<ProxyGateway>(PROXY_GATEWAY, NS, 'held'))?.status?.ready).toBeDefined();

    await annotate(PROXY_GATEWAY, 'held', null);
    const config = await eventually(() => configOf('held'), 20_000, 'held ConfigMap recreated');
    expect(config.data['gateway.yaml']).toContain('country: de');
    await waitCondition(PROXY_GATEWAY, 'held', 'Paused', 'False', 'Resumed');
    await eventually(
      async () => (await eventReasons('ProxyGateway', 'held')).includes('ReconcileResumed'),
      20_000,
      'ReconcileResumed event',
    );
    // Other conditions are the reconciler's again (Applied after the resume).
    expect((await condition(PROXY_GATEWAY, 'held', 'Applied'))?.status).toBe('True');
  });

  test('a paused ProxyGateway can still be deleted: its finalizer still releases the endpoint', async () => {
    await annotate(PROXY_GATEWAY, 'held', 'paused');
    await waitCondition(PROXY_GATEWAY, 'held', 'Paused', 'True');
    await fx.admin.delete(PROXY_GATEWAY, NS, 'held');
    await eventually(
      async () => (await fx.admin.get(PROXY_GATEWAY, NS, 'held')) === undefined,
      20_000,
      'held deleted',
    );
    const rows = await fx.db.pool.query(`SELECT 1 FROM gateway_endpoints WHERE plan = 'basic'`);
    expect(rows.rowCount).toBe(0);
  });

  test('a paused ApiKey is not rotated until the annotation goes', async () => {
    const key = (name: string, rotation: number) =>
      apply(API_KEY, 'ApiKey', name, {
        accountId: account.id,
        name,
        secretName: `${name}-api-key`,
        rotation,
      });
    const rotated = (name: string, rotation: number) =>
      eventually(
        async () => {
          const ak = await fx.admin.get<ApiKey>(API_KEY, NS, name);
          return ak?.status?.observedRotation === rotation ? ak : undefined;
        },
        20_000,
        `${name} at rotation ${rotation}`,
      );
    await key('held-key', 1);
    await key('control-key', 1);
    const before = await rotated('held-key', 1);
    await rotated('control-key', 1);

    await annotate(API_KEY, 'held-key', 'paused');
    await waitCondition(API_KEY, 'held-key', 'Paused', 'True', 'ReconcilePaused');
    expect(await eventReasons('ApiKey', 'held-key')).toContain('ReconcilePaused');
    const table = await fx.kube.kubectl(['get', 'apikeys', '-n', NS, 'held-key', '--no-headers']);
    expect(table).toMatch(/\bTrue\b/);

    await key('held-key', 2);
    await key('control-key', 2);
    await rotated('control-key', 2);
    const held = (await fx.admin.get<ApiKey>(API_KEY, NS, 'held-key'))!;
    expect(held.status?.observedRotation).toBe(1);
    expect(held.status?.prefix).toBe(before.status?.prefix);

    await annotate(API_KEY, 'held-key', null);
    const after = await rotated('held-key', 2);
    expect(after.status?.prefix).not.toBe(before.status?.prefix);
    await waitCondition(API_KEY, 'held-key', 'Paused', 'False', 'Resumed');
    expect(await eventReasons('ApiKey', 'held-key')).toContain('ReconcileResumed');
  });
});
