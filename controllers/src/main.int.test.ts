// The controller entrypoint as the chart runs it: `node controllers/src/main.ts` with a kubeconfig,
// DATABASE_URL and its Lease namespace; it takes the Lease, reconciles, and on SIGTERM stops,
// releases the Lease and exits 0.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { describeKube } from '#test/kube/describe-kube.ts';
import { eventually, RELEASE_NAMESPACE, startKube, type KubeEnv } from '#test/kube/env.ts';
import { kubeClientFor, leaseHolder } from '#test/kube/operator.ts';
import type { KubeObject } from './runtime/kube.ts';
import { RESOURCES } from './runtime/resources.ts';
import { PROXY_GATEWAY_V1ALPHA1 } from './crds/resources.ts';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

describeKube('controller entrypoint (node controllers/src/main.ts)', () => {
  let kube: KubeEnv;
  let db: TestDatabase;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    [kube, db] = await Promise.all([startKube(), createTestDatabase()]);
  }, 120_000);
  afterAll(async () => {
    child?.kill('SIGKILL');
    await kube?.stop();
    await db?.drop();
  });

  test('takes the Lease, reconciles a ProxyGateway, and on SIGTERM releases the Lease and exits 0', async () => {
    const logs: string[] = [];
    child = spawn(process.execPath, [MAIN], {
      env: {
        DATABASE_URL: db.url,
        KUBECONFIG: kube.operatorKubeconfig,
        PROXYFLEET_NAMESPACE: RELEASE_NAMESPACE,
        PROXYFLEET_POD_NAME: 'proxyfleet-controller-0',
        PROXYFLEET_HEALTH_HOST: '127.0.0.1',
        PROXYFLEET_HEALTH_PORT: '0',
        PROXYFLEET_GATEWAY_IMAGE: 'proxyfleet:e2e',
        PROXYFLEET_LOG_LEVEL: 'info',
        // The CRDs call the test's own webhook (test/kube/env.ts): this one would re-point their
        // caBundle at its CA. conversion.int.test.ts runs the controller's webhook.
        PROXYFLEET_WEBHOOK_ENABLED: 'false',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (c: Buffer) => logs.push(c.toString()));
    child.stderr?.on('data', (c: Buffer) => logs.push(c.toString()));
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
    const admin = kubeClientFor(kube.adminKubeconfig);
    const holder = () => leaseHolder(admin);
    try {
      await eventually(async () => (await holder()) === 'proxyfleet-controller-0', 30_000, 'lease taken');
      await admin.apply(
        PROXY_GATEWAY_V1ALPHA1,
        {
          apiVersion: 'proxyfleet.io/v1alpha1',
          kind: 'ProxyGateway',
          metadata: { name: 'e2e', namespace: 'default' },
          spec: {
            plan: 'basic',
            port: 12321,
            advertisedHost: 'e2e.example.com',
            exits: [{ name: 'direct', country: '*' }],
          },
        } as KubeObject,
        { fieldManager: 'test' },
      );
      const d = await eventually(
        () => admin.get<KubeObject & { spec: any }>(RESOURCES.deployment, 'default', 'e2e-gateway'),
        20_000,
        'deployment',
      );
      expect(d.spec.template.spec.containers[0].image).toBe('proxyfleet:e2e');
    } catch (err) {
      throw new Error(`${(err as Error).message}\ncontroller output:\n${logs.join('').slice(-4000)}`);
    }
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(await holder()).toBeUndefined(); // released: holderIdentity cleared
    expect(logs.join('')).toMatch(/became leader/);
  }, 60_000);
});
