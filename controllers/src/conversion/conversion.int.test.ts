// The conversion webhook as the controller runs it (certificate loop + HTTPS server), on a real
// kube-apiserver: the CRDs' clientConfig is a url on 127.0.0.1 (the API server runs on this
// host; in a cluster it is the Service), the certificate loop runs as the chart's least-privileged
// controller user. Objects written as v1alpha1 are read as v1beta1 and back, patched as v1beta1
// and read as v1alpha1; a CA rotation changes caBundle while conversions keep succeeding; and the
// webhook's p99 under `kubectl apply` of 200 objects is printed (docs/operator.md, "Versions").
import { X509Certificate } from 'node:crypto';
import { connect } from 'node:tls';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import { Registry } from 'prom-client';
import { describeKube } from '#test/kube/describe-kube.ts';
import { eventually, RELEASE_NAMESPACE, startKube, type KubeEnv } from '#test/kube/env.ts';
import { kubeClientFor } from '#test/kube/operator.ts';
import { freePort } from '#test/ports.ts';
import { API_KEY, API_KEY_V1ALPHA1, PROXY_GATEWAY, PROXY_GATEWAY_V1ALPHA1 } from '../crds/resources.ts';
import type { KubeClient, KubeObject } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { CONVERTED_CRDS, CRD, DEFAULT_TIMES } from './certificates.ts';
import { BETA_FIELDS_ANNOTATION } from './convert.ts';
import { startWebhook, type RunningWebhook } from './run.ts';

const NS = 'conversion';
const SECRET = 'proxyfleet-controller-webhook';
const ACCOUNT = '3fa85f64-5717-4562-b3fc-2c963f66afa6';
type Obj = KubeObject & { spec: Record<string, any>; status?: unknown };

const pgwSpec = {
  plan: 'basic',
  port: 12321,
  advertisedHost: 'gw.example.com',
  exits: [
    { name: 'direct', country: '*' },
    { name: 'us', country: 'us', sourceAddress: '10.0.0.7' },
  ],
  replicas: { min: 1, max: 3 },
  hostNetwork: true,
  nodeSelector: { 'proxyfleet.io/exit': 'true' },
};

describeKube('conversion webhook (v1alpha1 <-> v1beta1) on a real kube-apiserver', () => {
  let kube: KubeEnv;
  let admin: KubeClient;
  let webhook: RunningWebhook;
  let port: number;
  // The certificate loop's thresholds, changed by the rotation test to make the CA due.
  const times: Partial<typeof DEFAULT_TIMES> = { propagationMs: 0 };

  beforeAll(async () => {
    kube = await startKube();
    admin = kubeClientFor(kube.adminKubeconfig);
    await kube.apply(`apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${NS}\n`);
    // The webhook's Service, as the chart makes it: the owner of the certificate Secret.
    await kube.apply(
      `apiVersion: v1\nkind: Service\nmetadata: { name: proxyfleet-controller-webhook, namespace: ${RELEASE_NAMESPACE} }\nspec: { ports: [{ port: 9443 }] }\n`,
    );
    port = await freePort();
    // The CRDs call this webhook from now on; its CA comes from the certificate loop below.
    for (const name of CONVERTED_CRDS)
      await admin.mergePatch(CRD, undefined, name, {
        spec: { conversion: { webhook: { clientConfig: { url: `https://127.0.0.1:${port}/convert` } } } },
      });
    webhook = await startWebhook({
      client: kubeClientFor(kube.operatorKubeconfig),
      logger: createLogger(
        'controller',
        process.env.PROXYFLEET_TEST_LOG_LEVEL === 'debug' ? 'debug' : 'silent',
      ),
      registry: new Registry(),
      namespace: RELEASE_NAMESPACE,
      secretName: SECRET,
      serviceName: 'proxyfleet-controller-webhook',
      extraHosts: ['127.0.0.1'],
      mode: 'self',
      port,
      host: '127.0.0.1',
      // The test steps the loop itself (tick()); the API server's time to take a new caBundle
      // (propagationMs) is waited for in real time where the rotation needs it.
      times,
      checkIntervalMs: 3_600_000,
    });
    await eventually(() => admin.list(API_KEY_V1ALPHA1, { namespace: NS }), 30_000, 'conversions served');
  }, 120_000);
  afterAll(async () => {
    await webhook?.stop();
    await kube?.stop();
  });

  const applyAlpha = (kind: 'ApiKey' | 'ProxyGateway', name: string, spec: object) =>
    admin.apply<Obj>(
      kind === 'ApiKey' ? API_KEY_V1ALPHA1 : PROXY_GATEWAY_V1ALPHA1,
      { apiVersion: 'proxyfleet.io/v1alpha1', kind, metadata: { name, namespace: NS }, spec } as KubeObject,
      { fieldManager: 'test' },
    );

  test('the controller made the Secret, owned by the webhook Service, and published its CA in both CRDs', async () => {
    const secret = await admin.get<KubeObject & { data: Record<string, string> }>(
      RESOURCES.secret,
      RELEASE_NAMESPACE,
      SECRET,
    );
    // helm uninstall deletes the Service; garbage collection then takes the Secret the controller made.
    const service = await admin.get<KubeObject>(
      RESOURCES.service,
      RELEASE_NAMESPACE,
      'proxyfleet-controller-webhook',
    );
    expect(secret!.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'v1',
        kind: 'Service',
        name: 'proxyfleet-controller-webhook',
        uid: service!.metadata.uid,
      },
    ]);
    const ca = Buffer.from(secret!.data['ca.crt']!, 'base64').toString();
    for (const name of CONVERTED_CRDS) {
      const crd = await admin.get<Obj>(CRD, undefined, name);
      expect(Buffer.from(crd!.spec.conversion.webhook.clientConfig.caBundle, 'base64').toString()).toBe(ca);
    }
  });

  test('written as v1alpha1, read as v1beta1 and back unchanged', async () => {
    await applyAlpha('ApiKey', 'ci', { accountId: ACCOUNT, name: 'ci', secretName: 'ci-key' });
    await applyAlpha('ApiKey', 'main', { accountId: ACCOUNT, primary: true, secretName: 'main-key' });
    await applyAlpha('ProxyGateway', 'gw', pgwSpec);
    const ci = await admin.get<Obj>(API_KEY, NS, 'ci');
    expect(ci!.apiVersion).toBe('proxyfleet.io/v1beta1');
    expect(ci!.spec).toEqual({
      accountId: ACCOUNT,
      name: 'ci',
      type: 'Named',
      revoked: false,
      rotation: 0,
      secretRef: { name: 'ci-key', key: 'apiKey' },
    });
    expect((await admin.get<Obj>(API_KEY, NS, 'main'))!.spec.type).toBe('Primary');
    expect(ci!.metadata.annotations?.[BETA_FIELDS_ANNOTATION]).toBeUndefined();
    const back = await admin.get<Obj>(API_KEY_V1ALPHA1, NS, 'ci');
    expect(back!.spec).toEqual({
      accountId: ACCOUNT,
      name: 'ci',
      primary: false,
      revoked: false,
      rotation: 0,
      secretName: 'ci-key',
    });
    expect(back!.metadata.annotations?.[BETA_FIELDS_ANNOTATION]).toBeUndefined();
    const gwBeta = await admin.get<Obj>(PROXY_GATEWAY, NS, 'gw');
    const gwAlpha = await admin.get<Obj>(PROXY_GATEWAY_V1ALPHA1, NS, 'gw');
    expect(gwBeta!.spec).toEqual(gwAlpha!.spec);
    expect(gwAlpha!.spec).toMatchObject(pgwSpec);
  });

  test('patched as v1beta1, read as v1alpha1; a v1beta1-only value survives v1alpha1 updates', async () => {
    await admin.mergePatch(API_KEY, NS, 'ci', { spec: { rotation: 2 } });
    expect((await admin.get<Obj>(API_KEY_V1ALPHA1, NS, 'ci'))!.spec.rotation).toBe(2);
    await admin.mergePatch(PROXY_GATEWAY, NS, 'gw', { spec: { port: 12322 } });
    expect((await admin.get<Obj>(PROXY_GATEWAY_V1ALPHA1, NS, 'gw'))!.spec.port).toBe(12322);

    await admin.create(API_KEY, {
      apiVersion: 'proxyfleet.io/v1beta1',
      kind: 'ApiKey',
      metadata: { name: 'env', namespace: NS },
      spec: { accountId: ACCOUNT, name: 'env', secretRef: { name: 'env-key', key: 'PROXYFLEET_API_KEY' } },
    } as KubeObject);
    const alpha = await admin.get<Obj>(API_KEY_V1ALPHA1, NS, 'env');
    expect(alpha!.spec.secretName).toBe('env-key');
    expect(JSON.parse(alpha!.metadata.annotations![BETA_FIELDS_ANNOTATION]!)).toEqual({
      secretRef: { key: 'PROXYFLEET_API_KEY' },
    });
    // A v1alpha1 client's update (kubectl edit, a merge patch) keeps the key it cannot see.
    await admin.mergePatch(API_KEY_V1ALPHA1, NS, 'env', { spec: { rotation: 1 } });
    const beta = await admin.get<Obj>(API_KEY, NS, 'env');
    expect(beta!.spec).toMatchObject({
      rotation: 1,
      secretRef: { name: 'env-key', key: 'PROXYFLEET_API_KEY' },
    });
    expect(beta!.metadata.annotations?.[BETA_FIELDS_ANNOTATION]).toBeUndefined();
    // kubectl lists in either version.
    const listed = JSON.parse(
      await kube.kubectl(['get', 'apikeys.v1alpha1.proxyfleet.io', '-n', NS, '-o', 'json']),
    );
    expect(listed.items.map((i: Obj) => [i.metadata.name, i.spec.secretName])).toEqual([
      ['ci', 'ci-key'],
      ['env', 'env-key'],
      ['main', 'main-key'],
    ]);
  });

  test('v1beta1 validates exits by schema: a sourceAddress that is no IP address is refused', async () => {
    await expect(
      admin.apply(
        PROXY_GATEWAY,
        {
          apiVersion: 'proxyfleet.io/v1beta1',
          kind: 'ProxyGateway',
          metadata: { name: 'bad', namespace: NS },
          spec: { ...pgwSpec, exits: [{ name: 'x', country: 'us', sourceAddress: '10.0.0.300' }] },
        } as KubeObject,
        { fieldManager: 'test' },
      ),
    ).rejects.toThrow(/sourceAddress must be an IPv4 or IPv6 address/);
  });

  test('a CA rotation changes caBundle and conversions keep succeeding throughout', async () => {
    const caBundle = async () =>
      (await admin.get<Obj>(CRD, undefined, CONVERTED_CRDS[0]!))!.spec.conversion.webhook.clientConfig
        .caBundle as string;
    const servedIssuer = () =>
      new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
          resolve(socket.getPeerX509Certificate()!.issuer);
          socket.end();
        });
        socket.on('error', reject);
      });
    const before = await caBundle();
    const issuerBefore = await servedIssuer();
    const failures: string[] = [];
    let conversions = 0;
    let running = true;
    const load = (async () => {
      while (running) {
        await Promise.all([
          admin.list(API_KEY_V1ALPHA1, { namespace: NS }),
          admin.get(PROXY_GATEWAY_V1ALPHA1, NS, 'gw'),
        ]).then(
          () => (conversions += 2),
          (err: unknown) => failures.push((err as Error).message),
        );
      }
    })();
    // The CA is due for renewal: a new one is written, then published beside the old one.
    times.caRenewBeforeMs = DEFAULT_TIMES.caValidityMs;
    await webhook.certificates.tick();
    await webhook.certificates.tick();
    const both = Buffer.from(await caBundle(), 'base64').toString();
    expect(both.match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
    expect(await servedIssuer()).toBe(issuerBefore);
    // What propagationMs (5 minutes by default) stands for: the API server has the new bundle.
    await new Promise((r) => setTimeout(r, 3_000));
    times.caRenewBeforeMs = DEFAULT_TIMES.caRenewBeforeMs; // the new CA is not due
    await webhook.certificates.tick();
    const issuerAfter = await servedIssuer();
    expect(issuerAfter).not.toBe(issuerBefore);
    const after = Buffer.from(await caBundle(), 'base64').toString();
    expect(after).not.toBe(Buffer.from(before, 'base64').toString());
    // The bundle's first CA is the one the served certificate names as issuer.
    const first = new X509Certificate(after.split(/(?<=-----END CERTIFICATE-----\n)/)[0]!);
    expect(first.subject).toBe(issuerAfter);
    const countAtSwap = conversions;
    await eventually(async () => conversions >= countAtSwap + 20, 30_000, 'conversions after the swap');
    running = false;
    await load;
    expect(failures).toEqual([]);
    expect(conversions).toBeGreaterThan(20);
  }, 90_000);

  test('figure: the webhook p99 under `kubectl apply` of 200 v1alpha1 objects', async () => {
    webhook.webhook.duration.reset();
    const docs = Array.from({ length: 200 }, (_, i) =>
      JSON.stringify({
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ApiKey',
        metadata: { name: `bulk-${i}`, namespace: NS },
        spec: { accountId: ACCOUNT, name: `bulk-${i}`, secretName: `bulk-${i}` },
      }),
    ).join('\n---\n');
    const started = Date.now();
    await kube.kubectl(['apply', '-f', '-'], { input: docs });
    const applyMs = Date.now() - started;
    const listed = JSON.parse(
      await kube.kubectl(['get', 'apikeys.v1alpha1.proxyfleet.io', '-n', NS, '-o', 'json']),
    );
    expect(listed.items.length).toBeGreaterThanOrEqual(200);
    const metric = (await webhook.webhook.duration.get()).values;
    const le = (v: { labels: object }) => {
      const bound = String((v.labels as { le?: string | number }).le);
      return bound === '+Inf' ? Infinity : Number(bound);
    };
    const buckets = metric
      .filter((v) => v.metricName?.endsWith('_bucket'))
      .reduce((m, v) => m.set(le(v), (m.get(le(v)) ?? 0) + v.value), new Map<number, number>());
    const count = buckets.get(Infinity) ?? 0;
    expect(count).toBeGreaterThanOrEqual(200); // one review per create at least
    const sorted = [...buckets.entries()].sort((a, b) => a[0] - b[0]);
    // histogram_quantile(0.99, ...): linear within the bucket holding the 99th percentile.
    let lower = 0;
    let below = 0;
    let p99 = Infinity;
    for (const [le, cumulative] of sorted) {
      if (cumulative >= 0.99 * count) {
        p99 =
          le === Infinity ? lower : lower + ((le - lower) * (0.99 * count - below)) / (cumulative - below);
        break;
      }
      lower = le;
      below = cumulative;
    }
    const sum = metric.find((v) => v.metricName?.endsWith('_sum'))?.value ?? 0;
    console.log(
      `conversion webhook under kubectl apply of 200 ApiKeys (v1alpha1): ${count} reviews, ` +
        `p99 ${(p99 * 1000).toFixed(2)} ms (histogram_quantile), mean ${((sum / count) * 1000).toFixed(2)} ms; ` +
        `kubectl apply took ${applyMs} ms`,
    );
    expect(p99).toBeLessThan(Infinity);
  }, 120_000);

  test("the next release's storage-version migration as docs/operator.md says: kubectl replace, then storedVersions", async () => {
    const crd = 'apikeys.proxyfleet.io';
    const storage = (alpha: boolean) =>
      kube.kubectl([
        'patch',
        'crd',
        crd,
        '--type=json',
        '-p',
        JSON.stringify([
          { op: 'replace', path: '/spec/versions/0/storage', value: !alpha },
          { op: 'replace', path: '/spec/versions/1/storage', value: alpha },
        ]),
      ]);
    const storedVersions = async () =>
      (await admin.get<Obj & { status: { storedVersions: string[] } }>(CRD, undefined, crd))!.status
        .storedVersions;
    // An object written while v1alpha1 is the storage version (this release), then v1beta1 stored (the next).
    await storage(true);
    await applyAlpha('ApiKey', 'old', { accountId: ACCOUNT, name: 'old', secretName: 'old-key' });
    await storage(false);
    expect([...(await storedVersions())].sort()).toEqual(['v1alpha1', 'v1beta1']);
    const before = (await admin.get<Obj>(API_KEY, NS, 'old'))!.metadata.resourceVersion;
    const all = await kube.kubectl(['get', 'apikeys.v1beta1.proxyfleet.io', '-A', '-o', 'json']);
    await kube.kubectl(['replace', '-f', '-'], { input: all });
    const after = await admin.get<Obj>(API_KEY, NS, 'old');
    expect(after!.metadata.resourceVersion).not.toBe(before); // written again, as v1beta1
    expect(after!.spec.secretRef).toEqual({ name: 'old-key', key: 'apiKey' });
    await kube.kubectl([
      'patch',
      'crd',
      crd,
      '--subresource=status',
      '--type=merge',
      '-p',
      '{"status":{"storedVersions":["v1beta1"]}}',
    ]);
    expect(await storedVersions()).toEqual(['v1beta1']);
  }, 120_000);

  test("CRDs that call another release's webhook keep their caBundle (no two releases re-pointing them in turn)", async () => {
    const name = CONVERTED_CRDS[0]!;
    const config = async () =>
      (await admin.get<Obj>(CRD, undefined, name))!.spec.conversion.webhook.clientConfig as Record<
        string,
        unknown
      >;
    await admin.mergePatch(CRD, undefined, name, {
      spec: {
        conversion: {
          webhook: {
            clientConfig: {
              url: null,
              caBundle: null,
              service: { namespace: 'elsewhere', name: 'other-webhook', port: 9443 },
            },
          },
        },
      },
    });
    await webhook.certificates.tick();
    expect((await config()).caBundle).toBeUndefined();
    // Pointed back at this webhook, it gets the bundle again.
    await admin.mergePatch(CRD, undefined, name, {
      spec: {
        conversion: {
          webhook: { clientConfig: { service: null, url: `https://127.0.0.1:${port}/convert` } },
        },
      },
    });
    await webhook.certificates.tick();
    expect((await config()).caBundle).toBeDefined();
  });
});
