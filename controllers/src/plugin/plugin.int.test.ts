// The kubectl plugin as a person runs it: the real kubectl binary finds `kubectl-proxyfleet` on
// PATH (a link to bin/kubectl-proxyfleet.js, as `npm install -g` makes one) and runs it against
// the test kube-apiserver with the operator reconciling. `usage` reaches a real API (this
// process, on the machine's non-loopback address: the API server refuses to proxy to loopback)
// through a Service and its Endpoints. The figure: `status` wall time on 50 ProxyGateways.
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, test } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { describeKube } from '#test/kube/describe-kube.ts';
import { eventually, kubeconfigYaml, REPO_ROOT, tool } from '#test/kube/env.ts';
import { useOperator } from '#test/kube/operator.ts';
import { freePort } from '#test/ports.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { API_KEY, PROXY_GATEWAY } from '../crds/resources.ts';
import type { ApiKey, ProxyGateway } from '../crds/types.generated.ts';
import type { KubeObject } from '../runtime/kube.ts';
import type { GatewayRow } from './status.ts';

const NS = 'plugin';
const run = (cmd: string, args: string[]) =>
  new Promise<void>((resolve, reject) =>
    execFile(cmd, args, (err, _out, stderr) =>
      err ? reject(new Error(`${cmd} ${args.join(' ')}: ${err.message} ${stderr}`)) : resolve(),
    ),
  );

/** The machine's first non-loopback IPv4 address (the API listens there for the Service proxy). */
function hostAddress(): string {
  for (const list of Object.values(os.networkInterfaces()))
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  throw new Error('this machine has no non-loopback IPv4 address for the API to listen on');
}

describeKube('kubectl proxyfleet (the plugin through the real kubectl)', () => {
  let account: NewAccount;
  let api: TestApi;
  let dir: string;
  let certificate: X509Certificate;
  const fx = useOperator({
    before: async ({ kube, db }) => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'pf-plugin-'));
      await symlink(path.join(REPO_ROOT, 'bin/kubectl-proxyfleet.js'), path.join(dir, 'kubectl-proxyfleet'));
      account = await accountWithBandwidth(db.pool, { basic: 1e9 });
      const host = hostAddress();
      api = await startTestApi(db, { env: { PROXYFLEET_API_HOST: host } });
      const port = Number(new URL(api.url).port);
      // A certificate valid for 30 days, in the Secret the TLS gateway names.
      await run('openssl', [
        ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'],
        ...['-keyout', path.join(dir, 'tls.key'), '-out', path.join(dir, 'tls.crt'), '-days', '30'],
        ...['-subj', '/CN=basic.proxy.example.com'],
      ]);
      const crt = await readFile(path.join(dir, 'tls.crt'));
      certificate = new X509Certificate(crt);
      const b64 = (b: Buffer) => b.toString('base64');
      await kube.apply(
        [
          `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${NS}\n  labels:\n    proxyfleet.io/account-id: ${account.id}`,
          `apiVersion: v1\nkind: Secret\nmetadata:\n  name: basic-tls\n  namespace: ${NS}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: ${b64(crt)}\n  tls.key: ${b64(await readFile(path.join(dir, 'tls.key')))}`,
          // The chart's API Service; its Endpoints are made by hand below (no controller-manager here).
          `apiVersion: v1\nkind: Service\nmetadata:\n  name: proxyfleet-api\n  namespace: ${NS}\n  labels:\n    app.kubernetes.io/part-of: proxyfleet\n    app.kubernetes.io/component: api\nspec:\n  ports:\n    - { name: http, port: 8080, targetPort: ${port} }`,
          // The API server proxies only to an address that is a Pod's: an API pod's object, its
          // IP the one this process listens on (there is no kubelet to run it).
          `apiVersion: v1\nkind: Pod\nmetadata:\n  name: proxyfleet-api-0\n  namespace: ${NS}\nspec:\n  containers: [{ name: api, image: proxyfleet:test }]`,
        ].join('\n---\n'),
      );
      await kube.kubectl([
        ...['patch', 'pod', 'proxyfleet-api-0', '-n', NS, '--subresource=status', '--type=merge', '-p'],
        JSON.stringify({ status: { podIP: host, podIPs: [{ ip: host }] } }),
      ]);
      await kube.apply(
        `apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: proxyfleet-api\n  namespace: ${NS}\nsubsets:\n  - addresses: [{ ip: ${host}, targetRef: { kind: Pod, name: proxyfleet-api-0, namespace: ${NS} } }]\n    ports: [{ name: http, port: ${port} }]`,
      );
    },
    after: async () => {
      await api?.close();
      await rm(dir, { recursive: true, force: true });
    },
  });

  /** `kubectl <args>` with the plugin on PATH and Node 24 before the machine's Node. */
  const kubectl = (args: string[], kubeconfig = fx.kube.adminKubeconfig) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        tool('kubectl'),
        args,
        {
          env: {
            ...process.env,
            KUBECONFIG: kubeconfig,
            PATH: [dir, path.dirname(process.execPath), process.env.PATH].join(path.delimiter),
          },
        },
        (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const plugin = (args: string[], kubeconfig?: string) => kubectl(['proxyfleet', ...args], kubeconfig);
  const applyObject = (r: typeof PROXY_GATEWAY, kind: string, name: string, spec: object, namespace = NS) =>
    fx.admin.apply(
      { ...r, version: 'v1alpha1' },
      { apiVersion: 'proxyfleet.io/v1alpha1', kind, metadata: { name, namespace }, spec } as KubeObject,
      { fieldManager: 'test' },
    );
  const readyKey = (name: string, rotation: number) =>
    eventually(
      async () => {
        const ak = await fx.admin.get<ApiKey>(API_KEY, NS, name);
        const ready = ak?.status?.conditions?.find((c) => c.type === 'Ready');
        if (ak?.status?.observedRotation === rotation && ready?.status === 'True') return ak;
        throw new Error(`status ${JSON.stringify(ak?.status)}`); // the last one is in the failure
      },
      20_000,
      `${name} ready at rotation ${rotation}`,
    );

  test('kubectl finds the plugin; --help and wrong usage are answered plainly', async () => {
    const list = await kubectl(['plugin', 'list']);
    expect(list.stdout).toContain(path.join(dir, 'kubectl-proxyfleet'));
    const help = await plugin(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/kubectl proxyfleet status/);
    expect(help.stdout).toMatch(/kubectl proxyfleet usage ACCOUNT/);
    expect(help.stdout).toMatch(/kubectl proxyfleet rotate-key APIKEY/);
    expect(await plugin(['frobnicate'])).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'error: unknown command "frobnicate": expected status, usage or rotate-key\nSee kubectl proxyfleet --help.\n',
    });
    expect((await plugin(['rotate-key'])).stderr).toMatch(/^error: rotate-key takes one APIKEY/);
    expect((await plugin(['status', '--colour'])).stderr).toMatch(/^error: Unknown option '--colour'/);
    expect((await plugin(['usage', 'acme'])).stderr).toMatch(/"acme" is not an account id/);
  });

  test('an unreachable cluster is named, not a stack trace', async () => {
    const file = path.join(dir, 'nowhere.kubeconfig');
    const closed = await freePort(); // nothing listens there
    await writeFile(file, kubeconfigYaml(`https://127.0.0.1:${closed}`, 'x', 'nobody'));
    const r = await plugin(['status'], file);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^error: listing ProxyGateways: cannot reach the API server at https:\/\/127.0.0.1:\d+ \(ECONNREFUSED\)\n$/,
    );
  });

  test('status: every gateway with pods, exits, endpoint, TLS expiry and synced keys; then the keys', async () => {
    await applyObject(PROXY_GATEWAY, 'ProxyGateway', 'basic', {
      plan: 'basic',
      port: 12321,
      advertisedHost: 'basic.proxy.example.com',
      exits: [
        { name: 'us', country: 'us' },
        { name: 'de', country: 'de' },
      ],
      replicas: { min: 2, max: 2 },
      tls: { secretName: 'basic-tls' },
    });
    await applyObject(PROXY_GATEWAY, 'ProxyGateway', 'light', {
      plan: 'light',
      port: 10080,
      advertisedHost: 'light.proxy.example.com',
      exits: [{ name: 'direct', country: '*' }],
      replicas: { min: 2, max: 2 },
      tls: { secretName: 'absent-tls' },
    });
    await applyObject(API_KEY, 'ApiKey', 'ci', {
      accountId: account.id,
      name: 'ci',
      secretName: 'ci-api-key',
      rotation: 1,
    });
    await readyKey('ci', 1);
    await eventually(async () => {
      const ak = await fx.admin.get<ApiKey>(API_KEY, NS, 'ci');
      return ak?.status?.conditions?.find((c) => c.type === 'Synced')?.status === 'True';
    });
    // No kubelet here: the Deployment's pods are reported ready as a kubelet would.
    await eventually(() =>
      fx.admin.get(PROXY_GATEWAY, NS, 'basic').then((p) => (p as ProxyGateway)?.status?.endpoint),
    );
    await fx.kube.kubectl([
      ...['patch', 'deployment', 'basic-gateway', '-n', NS, '--subresource=status', '--type=merge'],
      ...['-p', '{"status":{"replicas":2,"readyReplicas":1}}'],
    ]);

    const json = await plugin(['status', '-n', NS, '-o', 'json']);
    expect(json.stderr).toBe('');
    const { gateways, apiKeys } = JSON.parse(json.stdout) as { gateways: GatewayRow[]; apiKeys: unknown[] };
    expect(gateways).toEqual([
      expect.objectContaining({
        namespace: NS,
        name: 'basic',
        plan: 'basic',
        pods: { ready: 1, desired: 2 },
        exits: ['us', 'de'],
        endpoint: 'basic.proxy.example.com:12321',
        tls: { secret: 'basic-tls', notAfter: new Date(certificate.validTo).toISOString() },
        keys: { synced: 1, total: 1 },
        paused: false,
      }),
      expect.objectContaining({
        name: 'light',
        pods: { ready: 0, desired: 2 },
        tls: { secret: 'absent-tls', problem: 'Secret absent-tls missing' },
      }),
    ]);
    expect(apiKeys).toEqual([
      expect.objectContaining({
        name: 'ci',
        accountId: account.id,
        ready: 'True (KeyActive)',
        paused: false,
      }),
    ]);

    const text = await plugin(['status']);
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n').map((l) => l.split(/\s{2,}/));
    expect(lines[0]).toEqual([
      ...['NAMESPACE', 'GATEWAY', 'PLAN', 'PODS', 'EXITS', 'ENDPOINT', 'TLS EXPIRES'],
      ...['KEYS SYNCED', 'READY', 'PAUSED'],
    ]);
    const basic = lines.find((l) => l[1] === 'basic')!;
    expect(basic.slice(0, 8)).toEqual([
      NS,
      'basic',
      'basic',
      '1/2',
      'us,de',
      'basic.proxy.example.com:12321',
      `${new Date(certificate.validTo).toISOString().slice(0, 10)} (29d)`,
      '1/1',
    ]);
    expect(text.stdout).toMatch(/^NAMESPACE\s+APIKEY\s+ACCOUNT\s+READY\s+SYNCED\s+CACHES\s+PAUSED$/m);
    process.stdout.write(`kubectl proxyfleet status\n${text.stdout}`);

    expect((await plugin(['status', '-n', 'nowhere'])).stdout).toBe(
      'No ProxyGateways in namespace nowhere.\n\nNo ApiKeys in namespace nowhere.\n',
    );
  });

  test('rotate-key: a new key in the Secret, waited for; unknown and paused keys refused', async () => {
    const before = await readyKey('ci', 1);
    const r = await plugin(['rotate-key', 'ci', '-n', NS]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const after = await fx.admin.get<ApiKey>(API_KEY, NS, 'ci');
    expect(after?.status?.observedRotation).toBe(2);
    expect(after?.status?.prefix).not.toBe(before.status?.prefix);
    expect(r.stdout).toMatch(
      new RegExp(`^apikey/ci rotated: rotation 2, key ${after!.status!.prefix!}… in Secret ci-api-key`),
    );

    expect(await plugin(['rotate-key', 'nope', '-n', NS])).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: apikey nope in namespace ${NS} not found (kubectl get apikeys -n ${NS} lists them)\n`,
    });
    await fx.admin.mergePatch(API_KEY, NS, 'ci', {
      metadata: { annotations: { 'proxyfleet.io/reconcile': 'paused' } },
    });
    const paused = await plugin(['rotate-key', 'ci', '-n', NS]);
    expect(paused.code).toBe(1);
    expect(paused.stderr).toMatch(
      /is paused: .*kubectl annotate apikey ci -n plugin proxyfleet.io\/reconcile-/,
    );
    expect((await fx.admin.get<ApiKey>(API_KEY, NS, 'ci'))?.spec.rotation).toBe(2);
    await fx.admin.mergePatch(API_KEY, NS, 'ci', {
      metadata: { annotations: { 'proxyfleet.io/reconcile': null } },
    });
  });

  test('usage: the account’s figures from the API through the Service proxy; accounts without a key are told why', async () => {
    await readyKey('ci', 2);
    const r = await plugin(['usage', account.id]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(
      new RegExp(`^account ${account.id}: figures of .* \\(read with apikey ${NS}/ci\\)\n`),
    );
    const rows = r.stdout
      .split('\n')
      .slice(1)
      .map((l) => l.split(/\s{2,}/));
    expect(rows[0]).toEqual(['PRODUCT', 'BOUGHT GB', 'USED GB', 'REMAINING GB']);
    expect(rows.find((l) => l[0] === 'basic')).toEqual(['basic', '1', '0', '1']);
    const json = JSON.parse((await plugin(['usage', account.id, '-o', 'json'])).stdout) as {
      products: Record<string, { totalGb: number }>;
    };
    expect(json.products.basic!.totalGb).toBe(1);

    const stranger = '00000000-0000-4000-8000-000000000000';
    const none = await plugin(['usage', stranger]);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(new RegExp(`^error: no ready ApiKey for account ${stranger} in the cluster`));
    const wrongService = await plugin(['usage', account.id, '--api-service', `${NS}/missing`]);
    expect(wrongService.code).toBe(1);
    expect(wrongService.stderr).toMatch(/asking the API \(Service plugin\/missing\) .*not found/);
  });

  test('figure: status on 50 ProxyGateways', async () => {
    const docs = Array.from({ length: 50 }, (_, i) =>
      JSON.stringify({
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ProxyGateway',
        metadata: { name: `gw-${i}`, namespace: 'fleet' },
        spec: {
          plan: 'datacenter',
          port: 10082,
          advertisedHost: `gw-${i}.proxy.example.com`,
          exits: [{ name: 'us', country: 'us' }],
          replicas: { min: 2, max: 2 },
        },
      }),
    );
    await fx.kube.apply(
      `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: fleet\n---\n${docs.join('\n---\n')}`,
    );
    await eventually(
      async () =>
        (await fx.admin.list<ProxyGateway>(PROXY_GATEWAY, { namespace: 'fleet' })).items.filter(
          (p) => p.status?.endpoint,
        ).length === 50,
      120_000,
      'the operator reported on 50 gateways',
    );
    const timed = async (args: string[]) => {
      const started = process.hrtime.bigint();
      const r = await plugin(args);
      return { ...r, ms: Number(process.hrtime.bigint() - started) / 1e6 };
    };
    // What starting kubectl and the plugin costs on its own (Node, type stripping, client-node).
    const startup = [];
    for (let i = 0; i < 5; i++) startup.push((await timed(['--help'])).ms);
    startup.sort((a, b) => a - b);
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = process.hrtime.bigint();
      const r = await plugin(['status', '-n', 'fleet']);
      times.push(Number(process.hrtime.bigint() - started) / 1e6);
      expect(r.code).toBe(0);
      expect(r.stdout.split('\n').filter((l) => l.startsWith('fleet ')).length).toBe(50);
    }
    times.sort((a, b) => a - b);
    process.stdout.write(
      `FIGURE kubectl proxyfleet status on 50 ProxyGateways (kubectl + plugin process, 5 runs): ` +
        `median ${times[2]!.toFixed(0)} ms, min ${times[0]!.toFixed(0)} ms, max ${times[4]!.toFixed(0)} ms; ` +
        `--help alone: median ${startup[2]!.toFixed(0)} ms\n`,
    );
  }, 180_000);
});
