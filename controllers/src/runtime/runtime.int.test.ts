// The runtime's failure modes on a real API server: two controller instances with one Lease (one
// leads, the other takes over when it stops), and watches killed under the informers (a TCP
// proxy in front of the API server cuts every connection) that restart and keep reconciling.
import net from 'node:net';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { describeKube } from '#test/kube/describe-kube.ts';
import {
  eventually,
  kubeconfigYaml,
  OPERATOR_USER,
  RELEASE_NAMESPACE,
  startKube,
  type KubeEnv,
} from '#test/kube/env.ts';
import { createTestOperator, kubeClientFor, leaseHolder } from '#test/kube/operator.ts';
import type { Operator } from '../operator.ts';
import type { KubeClient, KubeObject } from './kube.ts';
import { RESOURCES } from './resources.ts';
import { LeaderElector } from './leader.ts';
import { createLogger } from '#common/logger.ts';
import { PROXY_GATEWAY_V1ALPHA1 } from '../crds/resources.ts';

const NS = 'runtime';

/**
 * A TCP proxy to the API server whose connections the test can cut, or hang: after hang() it
 * forwards nothing more on open connections and accepts new ones without ever answering.
 */
async function cuttableProxy(
  target: URL,
): Promise<{ port: number; cut(): number; hang(): void; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const pairs = new Set<[net.Socket, net.Socket]>();
  let hanging = false;
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => client.destroy()).on('close', () => sockets.delete(client));
    if (hanging) return; // accepted, never answered
    const upstream = net.connect(Number(target.port), target.hostname);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
      pairs.delete(pair);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    hang() {
      hanging = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    cut() {
      const n = sockets.size;
      for (const s of sockets) s.destroy();
      sockets.clear();
      return n;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describeKube('controller runtime on a real API server', () => {
  let kube: KubeEnv;
  let db: TestDatabase;
  let admin: KubeClient;
  const operators: Operator[] = [];

  beforeAll(async () => {
    [kube, db] = await Promise.all([startKube(), createTestDatabase()]);
    admin = kubeClientFor(kube.adminKubeconfig);
    await kube.apply(`apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${NS}\n`);
  }, 120_000);

  afterAll(async () => {
    for (const o of operators) await o.stop();
    await kube?.stop();
    await db?.drop();
  });

  const pgw = (name: string, plan: string, port: number) =>
    admin.apply(
      PROXY_GATEWAY_V1ALPHA1,
      {
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ProxyGateway',
        metadata: { name, namespace: NS },
        spec: {
          plan,
          port,
          advertisedHost: `${name}.example.com`,
          exits: [{ name: 'direct', country: '*' }],
        },
      } as KubeObject,
      { fieldManager: 'test' },
    );
  const holder = () => leaseHolder(admin);

  test('leader election: of two instances one leads; when it stops the other takes over', async () => {
    // A renew deadline of 5 s, not the helper's 2 s: on a busy machine an API server shared with
    // the rest of the suite can take longer than 2 s to answer a renewal, and a healthy a would
    // step down. The lease (8 s) keeps the standby check below as strict as before: b would take
    // an un-renewed Lease after 8 s plus a retry period, within the 10 s it is watched.
    const lease = { durationMs: 8_000, renewDeadlineMs: 5_000, retryPeriodMs: 1_000 };
    const a = createTestOperator({
      kubeconfig: kube.operatorKubeconfig,
      pool: db.pool,
      leaseNamespace: RELEASE_NAMESPACE,
      identity: 'a',
      lease,
    });
    operators.push(a);
    await a.start();
    await eventually(async () => (await holder()) === 'a' && a.leading, 15_000, 'a leads');
    const b = createTestOperator({
      kubeconfig: kube.operatorKubeconfig,
      pool: db.pool,
      leaseNamespace: RELEASE_NAMESPACE,
      identity: 'b',
      lease,
    });
    operators.push(b);
    await b.start();
    await pgw('led', 'basic', 12321);
    await eventually(() => admin.get(RESOURCES.deployment, NS, 'led-gateway'), 15_000, 'leader reconciles');
    // b keeps standing by while a renews (more than a lease duration and a retry period since b
    // started: b would have taken a Lease that a did not renew).
    await new Promise((r) => setTimeout(r, 10_000));
    expect(b.leading).toBe(false);
    expect(await holder()).toBe('a');

    await a.stop(); // releases the Lease
    await eventually(async () => (await holder()) === 'b' && b.leading, 15_000, 'b takes over');
    expect(a.leading).toBe(false);
    await pgw('after-failover', 'advanced', 61236);
    await eventually(
      () => admin.get(RESOURCES.deployment, NS, 'after-failover-gateway'),
      15_000,
      'new leader reconciles',
    );
    await b.stop();
  }, 90_000);

  test('the Lease names its holder pod as owner, so it goes with the last one (helm uninstall)', async () => {
    const owner = (name: string) => ({
      apiVersion: 'v1' as const,
      kind: 'Pod' as const,
      name,
      uid: `uid-${name}`,
    });
    const elector = (identity: string) =>
      new LeaderElector({
        client: kubeClientFor(kube.operatorKubeconfig),
        namespace: RELEASE_NAMESPACE,
        name: 'owned-lease',
        identity,
        owner: owner(identity),
        logger: createLogger('controller', 'silent'),
        leaseDurationMs: 8_000,
        renewDeadlineMs: 5_000,
        retryPeriodMs: 500,
        onStartedLeading: () => undefined,
        onStoppedLeading: () => undefined,
      });
    const owners = async () =>
      (await admin.get<KubeObject>(RESOURCES.lease, RELEASE_NAMESPACE, 'owned-lease'))?.metadata
        .ownerReferences;
    const a = elector('pod-a');
    const b = elector('pod-b');
    try {
      a.start();
      await eventually(async () => a.isLeader, 10_000, 'a leads');
      expect(await owners()).toEqual([owner('pod-a')]);
      b.start();
      await a.stop(); // releases the Lease: b takes it and becomes its owner
      await eventually(async () => b.isLeader, 15_000, 'b takes over');
      expect(await owners()).toEqual([owner('pod-b')]);
    } finally {
      await a.stop();
      await b.stop();
    }
  }, 60_000);

  /**
   * Two electors on one Lease: a reaches the API server through a fault-injecting proxy, b
   * directly. Once a leads (and b stands by), `fault` breaks a's path; returns, once b leads,
   * the order in which both started and stopped leading, and whether a still thinks it leads.
   */
  async function failover(
    leaseName: string,
    fault: (proxy: Awaited<ReturnType<typeof cuttableProxy>>) => Promise<void> | void,
  ): Promise<{ timeline: string[]; aLeading: boolean }> {
    const proxy = await cuttableProxy(new URL(kube.server));
    const kubeconfig = path.join(os.tmpdir(), `proxyfleet-${leaseName}-${process.pid}.kubeconfig`);
    await writeFile(
      kubeconfig,
      kubeconfigYaml(`https://127.0.0.1:${proxy.port}`, kube.operatorToken, OPERATOR_USER),
    );
    const timeline: string[] = [];
    const elector = (identity: string, client: KubeClient) =>
      new LeaderElector({
        client,
        namespace: RELEASE_NAMESPACE,
        name: leaseName,
        identity,
        logger: createLogger('controller', 'silent'),
        // The margin between the renew deadline and the lease duration (5 s) is what keeps two
        // leaders from overlapping, as in client-go (15 s / 10 s by default). A renew deadline
        // of 5 s (not 1.5 s) lets a healthy a renew on a busy machine whose API server is slow.
        leaseDurationMs: 10_000,
        renewDeadlineMs: 5_000,
        retryPeriodMs: 500,
        onStartedLeading: () => void timeline.push(`${identity} leads`),
        onStoppedLeading: () => void timeline.push(`${identity} stops`),
      });
    // The client's own request timeout (30 s) is far beyond the lease duration.
    const a = elector('a', kubeClientFor(kubeconfig));
    const b = elector('b', kubeClientFor(kube.operatorKubeconfig));
    try {
      a.start();
      await eventually(async () => a.isLeader, 10_000, 'a leads');
      b.start();
      await new Promise((r) => setTimeout(r, 1_000));
      expect(b.isLeader).toBe(false);
      await fault(proxy);
      await eventually(async () => b.isLeader, 30_000, 'b takes over');
      return { timeline: [...timeline], aLeading: a.isLeader };
    } finally {
      await proxy.close();
      await a.stop();
      await b.stop();
    }
  }

  /**
   * The order that matters: a led first, b led once, and at the moment b started a had stopped.
   * (A renewal that a busy API server answered late may have made a step down and lead again
   * before the fault: correct behaviour, so not failed here.)
   */
  const expectHandover = (timeline: string[]) => {
    expect(timeline[0]).toBe('a leads');
    expect(timeline.filter((e) => e === 'b leads')).toEqual(['b leads']);
    expect(timeline.slice(-2)).toEqual(['a stops', 'b leads']);
  };

  test('a leader cut off from the API server stops within its renew deadline; a peer takes over after the lease duration', async () => {
    // a can no longer renew: as if its node lost the network.
    const { timeline } = await failover('crash-test', (proxy) => proxy.close());
    expectHandover(timeline);
  }, 60_000);

  test('a leader whose renew calls hang (accepted, never answered) steps down at its renew deadline, before a peer takes over', async () => {
    // a's GET/PUT now wait forever; only its own deadline timer can end them.
    const { timeline, aLeading } = await failover('hang-test', (proxy) => proxy.hang());
    expectHandover(timeline);
    expect(aLeading).toBe(false);
  }, 60_000);

  test('watches cut under the informers restart with backoff and the controller keeps reconciling', async () => {
    const proxy = await cuttableProxy(new URL(kube.server));
    const kubeconfig = path.join(os.tmpdir(), `proxyfleet-cut-${process.pid}.kubeconfig`);
    await writeFile(
      kubeconfig,
      kubeconfigYaml(`https://127.0.0.1:${proxy.port}`, kube.operatorToken, OPERATOR_USER),
    );
    const op = createTestOperator({ kubeconfig, pool: db.pool });
    operators.push(op);
    try {
      await op.start();
      await pgw('before-cut', 'light', 10080);
      await eventually(
        () => admin.get(RESOURCES.deployment, NS, 'before-cut-gateway'),
        15_000,
        'reconciled before the cut',
      );
      const restartsBefore = op.informers.reduce((n, i) => n + i.restarts, 0);
      expect(proxy.cut()).toBeGreaterThan(0);
      await eventually(
        async () => op.informers.reduce((n, i) => n + i.restarts, 0) > restartsBefore,
        10_000,
        'watch restarts seen',
      );
      // A change made after the cut arrives over a restarted watch.
      await pgw('after-cut', 'mobile', 10081);
      await eventually(
        () => admin.get(RESOURCES.deployment, NS, 'after-cut-gateway'),
        15_000,
        'reconciled after the cut',
      );
      // And again: a second cut is survived as well.
      proxy.cut();
      await pgw('after-second-cut', 'datacenter', 10082);
      await eventually(
        () => admin.get(RESOURCES.deployment, NS, 'after-second-cut-gateway'),
        15_000,
        'reconciled after the second cut',
      );
      for (const inf of op.informers) expect(inf.silenceSeconds()).toBeGreaterThanOrEqual(0);
    } finally {
      await op.stop();
      await proxy.close();
    }
  }, 60_000);
});
