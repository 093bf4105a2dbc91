// What the ProxyGateway reconciler costs per round, with a client and a pool that record their
// calls: a requeue with nothing changed since a clean reconcile is the exits' refresh (one query,
// no API call unless the status changed); anything else is a whole reconcile. The behaviour on a
// real API server is reconciler.int.test.ts's.
import { describe, expect, test } from '@jest/globals';
import type { Pool } from '#common/db/pool.ts';
import { createLogger } from '#common/logger.ts';
import type { ProxyGateway } from '../crds/types.generated.ts';
import type { Informer } from '../runtime/informer.ts';
import type { KubeClient, KubeObject } from '../runtime/kube.ts';
import { EXITS_REFRESH_MS, PGW_FINALIZER, proxyGatewayReconciler } from './reconciler.ts';

const KEY = 'proxy/dc';

function world(opts: { hostNetwork?: boolean } = {}) {
  let pgw: ProxyGateway = {
    apiVersion: 'proxyfleet.io/v1alpha1',
    kind: 'ProxyGateway',
    metadata: { name: 'dc', namespace: 'proxy', uid: 'u-1', generation: 1, finalizers: [PGW_FINALIZER] },
    spec: {
      plan: 'datacenter',
      port: 10082,
      advertisedHost: 'dc.example.com',
      exits: [{ name: 'dc-1', country: 'us', sourceAddress: '10.0.0.5' }],
      session: { defaultMinutes: 10, maxMinutes: 1440 },
      timeouts: { headersSeconds: 10, connectSeconds: 10, idleSeconds: 300, maxLifetimeSeconds: 86400 },
      limits: { maxConnectionsPerAccount: 1000 },
      replicas: { min: 2, max: 2 },
      autoscaling: { targetCPUUtilizationPercent: 70 },
      service: { type: 'ClusterIP' },
      ...(opts.hostNetwork ? { hostNetwork: true } : {}),
    },
  };
  let pods = 2;
  let rows: Array<{ gateway_id: string; exits: unknown }> = [];
  let endpointOwner = 'ProxyGateway/proxy/dc';
  const calls: string[] = [];
  const queries: string[] = [];
  const events: string[] = [];
  const client = {
    get: (r: { kind: string }, _ns: string, name: string) => {
      calls.push(`get ${r.kind}`);
      // Every child exists and is ours.
      return Promise.resolve({
        metadata: { name, ownerReferences: [{ controller: true, uid: 'u-1' }] },
      } as KubeObject);
    },
    apply: (r: { kind: string }, o: KubeObject, options: { subresource?: string }) => {
      calls.push(`apply ${r.kind}${options.subresource ? `/${options.subresource}` : ''}`);
      // The informer then sees the status written.
      if (options.subresource) pgw = { ...pgw, status: (o as ProxyGateway).status! };
      return Promise.resolve(o);
    },
    delete: (r: { kind: string }) => {
      calls.push(`delete ${r.kind}`);
      return Promise.resolve();
    },
  } as unknown as KubeClient;
  const pool = {
    query: (sql: string) => {
      queries.push(sql.trim().split(/\s+/).slice(0, 3).join(' '));
      if (sql.includes('gateway_heartbeats')) return Promise.resolve({ rows });
      if (sql.includes('RETURNING source'))
        return Promise.resolve({
          rows: endpointOwner === 'ProxyGateway/proxy/dc' ? [{ source: endpointOwner }] : [],
        });
      if (sql.includes('SELECT source')) return Promise.resolve({ rows: [{ source: endpointOwner }] });
      return Promise.resolve({ rows: [] });
    },
  } as unknown as Pool;
  const reconcile = proxyGatewayReconciler({
    client,
    pool,
    gateways: { get: () => pgw } as unknown as Informer<ProxyGateway>,
    placement: {
      gateways: () => [pgw],
      nodes: () => [{ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' } }],
    },
    deployments: {
      get: () => ({ metadata: { name: 'dc-gateway', generation: 1 }, status: { replicas: pods } }),
    } as unknown as Informer<KubeObject>,
    recorder: {
      record: (_o, type, reason) => {
        events.push(`${type} ${reason}`);
        return Promise.resolve();
      },
    },
    logger: createLogger('test', 'silent'),
    options: {
      image: 'proxyfleet:test',
      imagePullPolicy: 'IfNotPresent',
      databaseSecret: { name: 'db', key: 'url' },
      logLevel: 'info',
    },
  });
  /** One round; what it cost: API calls and queries (their first words), and its result. */
  const round = async (requeued: boolean) => {
    calls.length = 0;
    queries.length = 0;
    const result = await reconcile(KEY, { requeued });
    return { calls: [...calls], queries: [...queries], result };
  };
  return {
    round,
    events,
    status: () => pgw.status,
    beat: (exits: unknown) => (rows = [{ gateway_id: 'dc-gateway-7d9c5b8f4-x2kqz', exits }]),
    setPods: (n: number) => (pods = n),
    giveEndpointTo: (owner: string) => (endpointOwner = owner),
  };
}

const HEARTBEATS = ['SELECT gateway_id, exits'];

describe('the cost of a reconcile', () => {
  test('a requeue after a clean reconcile reads the heartbeats only, and writes status only when it changed', async () => {
    const w = world();
    w.beat([{ n: 'dc-1', s: 'ok' }]);
    const full = await w.round(false);
    expect(full.calls).toEqual(expect.arrayContaining(['apply Deployment', 'apply ProxyGateway/status']));
    expect(full.queries).toEqual(expect.arrayContaining(HEARTBEATS));
    expect(full.result).toEqual({ requeueAfterMs: EXITS_REFRESH_MS });
    expect(w.status()).toMatchObject({ exitsReady: '1/1', failedExits: 0 });

    const quiet = await w.round(true);
    expect(quiet).toEqual({ calls: [], queries: HEARTBEATS, result: { requeueAfterMs: EXITS_REFRESH_MS } });

    w.beat([{ n: 'dc-1', s: 'missing' }]);
    const changed = await w.round(true);
    expect(changed.calls).toEqual(['apply ProxyGateway/status']);
    expect(changed.queries).toEqual(HEARTBEATS);
    expect(w.status()).toMatchObject({ exitsReady: '0/1', failedExits: 1 });
    expect(w.events).toContain('Warning ExitAddressMissing');

    // An event (requeued false): the whole reconcile again, its status unchanged so not written.
    const again = await w.round(false);
    expect(again.calls).toContain('apply Deployment');
    expect(again.calls).not.toContain('apply ProxyGateway/status');
  });

  test('no refresh without pods, and none of the shortcut while the plan endpoint is not ours', async () => {
    const w = world();
    w.setPods(0);
    expect((await w.round(false)).result).toBeUndefined();
    w.beat([{ n: 'dc-1', s: 'ok' }]);
    // A pod still beats (terminating): refreshed until it stops.
    expect((await w.round(false)).result).toEqual({ requeueAfterMs: EXITS_REFRESH_MS });

    w.giveEndpointTo('ProxyGateway/other/dc');
    const conflict = await w.round(false);
    expect(conflict.result).toEqual({ requeueAfterMs: 5_000 });
    // Its retry is a whole reconcile (to claim the endpoint once free), though only requeued.
    expect((await w.round(true)).calls).toContain('apply Deployment');
  });

  test('the refresh keeps the HostNetwork condition of a hostNetwork gateway (it recomputes placement, not drops it)', async () => {
    const w = world({ hostNetwork: true });
    w.beat([{ n: 'dc-1', s: 'ok' }]);
    await w.round(false);
    const hostNetwork = () => w.status()?.conditions?.find((c) => c.type === 'HostNetwork');
    // replicas 2..2 on one node: capped.
    expect(hostNetwork()).toMatchObject({ status: 'True', reason: 'ReplicasCapped' });
    const quiet = await w.round(true);
    expect(quiet.calls).toEqual([]);
    expect(hostNetwork()).toMatchObject({ status: 'True', reason: 'ReplicasCapped' });
  });
});
