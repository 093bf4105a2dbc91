// The chart installed for real on the one-node cluster of `npm run cluster` with the image of
// `npm run image`, in a namespace enforcing Pod Security `restricted` (pod-security.ts, with
// `helm test`): API, worker, controller and relay pods Ready; a ProxyGateway and an ApiKey applied
// with kubectl; the API and gateway pods take their changes from the relay (found by its Service's
// environment variables: the cluster runs no DNS); traffic through gateway pods billed exactly; a
// gateway pod killed mid-transfer; a rolling update under load without a failed request; scaling;
// exits on the node's own addresses (exits.ts); the dashboard over HTTPS through an ingress
// controller (https.ts); helm upgrade and uninstall leaving nothing behind (uninstall.ts); then an
// upgrade from the previous release and a rollback to it under traffic, in a release of its own
// (upgrade.ts). PostgreSQL: the cluster's own server on the node's bridge address (docs/adr/0066).
// The steps share one release and run in order.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { z } from 'zod';
import { FLUSH_MS } from '../../gateway/src/accounting/ledger.ts';
import { PER_CONNECTION_SLACK_BYTES } from '../../gateway/src/accounting/policy.ts';
import { REPO_ROOT } from '../process.ts';
import {
  accepts,
  adminApi,
  CLUSTER_PG_PORT,
  clusterUp,
  containerPid,
  eventually,
  isReady,
  kubectlFor,
  NODE_IP,
  pods,
  proxyRequest,
  readyPods,
  sleep,
  startOrigin,
  VERSION,
  type Kubectl,
  type Origin,
  type Pod,
} from './cluster.ts';
import { exitsNamespace, exitSteps } from './exits.ts';
import { httpsSteps } from './https.ts';
import { podSecuritySteps, restrictedNamespace } from './pod-security.ts';
import { uninstallSteps } from './uninstall.ts';
import { upgradeSteps } from './upgrade.ts';

const RELEASE = 'proxyfleet';
const NAMESPACE = `e2e-${process.pid}`;
/** A second install after the uninstall, beside the kept CRDs. */
const AGAIN = `${NAMESPACE}-again`;
const DATABASE = `e2e_${Date.now()}_${process.pid}`;
const ADMIN_TOKEN = randomBytes(24).toString('hex');
const GATEWAY = 'basic';
const GATEWAY_SELECTOR = `proxyfleet.io/proxygateway=${GATEWAY}`;
const RELAY_SELECTOR = 'app.kubernetes.io/name=proxyfleet-relay';
const accountSchema = z.object({ id: z.string(), proxyUsername: z.string(), proxyPassword: z.string() });
type Account = z.infer<typeof accountSchema>;
const say = (line: string) => process.stdout.write(`[e2e] ${line}\n`);

let kubectl: Kubectl;
let kubeconfigPath: string;
let db: pg.Pool;
let origin: Origin;
let apiUrl: string;
let gatewayPort: number;
const n = ['-n', NAMESPACE];

const admin = adminApi(() => apiUrl, ADMIN_TOKEN);

async function customer(name: string, gb: number, product = 'basic'): Promise<Account> {
  const account = accountSchema.parse(
    await admin('POST', '/admin/v1/accounts', { email: `${name}-${process.pid}@e2e.example` }),
  );
  await admin('POST', `/admin/v1/accounts/${account.id}/purchases`, { product, gb });
  return account;
}
const credentials = (a: Account) => `${a.proxyUsername}:${a.proxyPassword}`;

/** balances.used_bytes of the account's basic product once the worker's fold stopped changing it. */
async function billedWhenSettled(accountId: string, expected?: number): Promise<number> {
  let last = -1;
  let stableSince = Date.now();
  return eventually(
    `the billed bytes of ${accountId} to settle`,
    async () => {
      const { rows } = await db.query<{ used: string }>(
        `SELECT used_bytes::text AS used FROM balances WHERE account_id = $1 AND product = 'basic'`,
        [accountId],
      );
      const used = Number(rows[0]?.used ?? 0);
      if (used !== last) [last, stableSince] = [used, Date.now()];
      if (expected !== undefined && used === expected) return used;
      // Flushes every 2 s, folds every 1 s: 6 s without a change is settled.
      return Date.now() - stableSince > 6_000 ? used : undefined;
    },
    90_000,
  );
}

const nodePort = async (service: string) =>
  Number(await kubectl(['get', 'service', service, ...n, '-o', 'jsonpath={.spec.ports[0].nodePort}']));

function proxyGatewayYaml(extra: string): string {
  return `apiVersion: proxyfleet.io/v1alpha1
kind: ProxyGateway
metadata: { name: ${GATEWAY}, namespace: ${NAMESPACE} }
spec:
  plan: basic
  port: 12321
  advertisedHost: basic.proxy.e2e.example
  exits: [{ name: direct, country: '*' }]
  service: { type: NodePort }
  resources: { requests: { cpu: 50m, memory: 96Mi } }
${extra}`;
}

const CREDENTIALS_KEY = randomBytes(32).toString('hex');
/** helm install of the chart with the local image into `namespace`, against the run's database. */
const installArgs = (namespace: string) => [
  'install',
  RELEASE,
  path.join(REPO_ROOT, 'charts/proxyfleet'),
  '-n',
  namespace,
  ...[
    'image.repository=localhost/proxyfleet',
    `image.tag=${VERSION}`,
    'image.pullPolicy=Never',
    `database.url=postgresql://postgres@${NODE_IP}:${CLUSTER_PG_PORT}/${DATABASE}`,
    `apiSecrets.adminToken=${ADMIN_TOKEN}`,
    `apiSecrets.credentialsKey=${CREDENTIALS_KEY}`,
    'api.replicas=1',
    'api.service.type=NodePort',
    // Required by the chart: the base of the links in emails (the NodePort is known only later).
    'api.dashboardUrl=https://dashboard.e2e.example.test',
    'worker.replicas=1',
    'controller.replicas=1',
    `controller.gatewayAllowCidrs={${NODE_IP}/32}`,
    // The change relay (two replicas), found by its Service's environment variables: this
    // one-node cluster runs no cluster DNS (a real cluster keeps relay.address=dns).
    'relay.address=serviceEnv',
  ].flatMap((v) => ['--set', v]),
  // `helm test` also asks the ProxyGateway of these steps for its 407.
  '--set-json',
  `tests.gateways=[{"name":"${GATEWAY}","port":12321}]`,
];

beforeAll(async () => {
  const started = Date.now();
  const { image, kubeconfig } = await clusterUp();
  kubeconfigPath = kubeconfig;
  say(`image ${image} and cluster up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  kubectl = kubectlFor(kubeconfig);
  db = new pg.Pool({
    connectionString: `postgresql://postgres@127.0.0.1:${CLUSTER_PG_PORT}/postgres`,
    max: 2,
  });
  await db.query(`CREATE DATABASE ${DATABASE}`);
  await db.end();
  db = new pg.Pool({
    connectionString: `postgresql://postgres@127.0.0.1:${CLUSTER_PG_PORT}/${DATABASE}`,
    max: 2,
  });
  origin = await startOrigin();
  await restrictedNamespace(kubectl, NAMESPACE);
}, 900_000);

afterAll(async () => {
  await kubectl?.helm(['uninstall', RELEASE, ...n, '--wait', '--ignore-not-found']).catch(() => undefined);
  await kubectl
    ?.helm(['uninstall', RELEASE, '-n', AGAIN, '--wait', '--ignore-not-found'])
    .catch(() => undefined);
  for (const ns of [NAMESPACE, exitsNamespace(NAMESPACE), AGAIN])
    await kubectl?.(['delete', 'namespace', ns, '--wait=true', '--timeout=120s', '--ignore-not-found']).catch(
      () => undefined,
    );
  await origin?.close();
  await db?.end();
  const admin = new pg.Pool({
    connectionString: `postgresql://postgres@127.0.0.1:${CLUSTER_PG_PORT}/postgres`,
  });
  await admin.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
}, 300_000);

describe('the chart on a real one-node cluster', () => {
  test('helm install: the api, worker, controller and relay pods become Ready', async () => {
    const t0 = Date.now();
    await kubectl.helm([...installArgs(NAMESPACE), '--wait', '--timeout', '5m']);
    for (const component of ['api', 'worker', 'controller']) {
      await readyPods(kubectl, NAMESPACE, `app.kubernetes.io/name=proxyfleet-${component}`, 1);
    }
    await readyPods(kubectl, NAMESPACE, RELAY_SELECTOR, 2);
    say(`helm install --wait: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    apiUrl = `http://127.0.0.1:${await nodePort(`${RELEASE}-api`)}`;
    const ready = await eventually('the API /readyz', async () => {
      const res = await fetch(`${apiUrl}/readyz`);
      return res.ok ? ((await res.json()) as { ready: boolean }) : undefined;
    });
    expect(ready.ready).toBe(true);
  }, 400_000);

  let a: Account;
  test('a ProxyGateway and an ApiKey applied with kubectl: pods Ready, status columns, the key works', async () => {
    a = await customer('exact', 0.1);
    await kubectl(['apply', '-f', '-'], proxyGatewayYaml('  replicas: { min: 2, max: 2 }\n'));
    await kubectl(
      ['apply', '-f', '-'],
      `apiVersion: proxyfleet.io/v1alpha1
kind: ApiKey
metadata: { name: ci, namespace: ${NAMESPACE} }
spec: { accountId: ${a.id}, name: ci, secretName: ci-api-key }
`,
    );
    await readyPods(kubectl, NAMESPACE, GATEWAY_SELECTOR, 2);
    const columns = await eventually('the ProxyGateway status columns', async () => {
      const row = (await kubectl(['get', 'pgw', GATEWAY, ...n, '--no-headers'])).trim().split(/\s+/);
      // EXITS fills in once the pods' heartbeats have reported their exits (within about 20 s).
      return row[3] === '2/2' && row[4] === '1/1' && row[5] === 'PodsReady' ? row : undefined;
    });
    expect(columns.slice(0, 7)).toEqual([
      GATEWAY,
      'basic',
      '12321',
      '2/2',
      '1/1',
      'PodsReady',
      'basic.proxy.e2e.example:12321',
    ]);
    const key = await eventually('the ApiKey to be Ready', async () => {
      const ak = await kubectl.json<{ status?: { conditions?: Array<{ type: string; status: string }> } }>([
        'get',
        'ak',
        'ci',
        ...n,
      ]);
      return ak.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? true : undefined;
    });
    expect(key).toBe(true);
    const secret = Buffer.from(
      await kubectl(['get', 'secret', 'ci-api-key', ...n, '-o', 'jsonpath={.data.apiKey}']),
      'base64',
    ).toString();
    const usage = await fetch(`${apiUrl}/api/v1/usage`, { headers: { 'x-api-key': secret } });
    expect(usage.status).toBe(200);
    const wrong = await fetch(`${apiUrl}/api/v1/usage`, { headers: { 'x-api-key': `${secret}x` } });
    expect(wrong.status).toBe(401);
    gatewayPort = await nodePort(`${GATEWAY}-gateway`);
    // Pods Ready is not yet a routed Service: kube-proxy programs the NodePort on its next sync,
    // seconds later on a loaded node (a request sent before was refused: ECONNREFUSED, status 0).
    await eventually('kube-proxy to route the gateway NodePort', () => accepts(gatewayPort));
  }, 300_000);

  podSecuritySteps(() => ({ kubectl, namespace: NAMESPACE, release: RELEASE, gateway: GATEWAY, say }));

  test('the API and gateway pods take their changes from the relay: only the relays LISTEN; a password reset reaches every gateway pod', async () => {
    // The kubelet expanded the relay Service's variables in the controller's environment, and the
    // controller gave the gateway pods the result: the Service's address.
    const clusterIp = (
      await kubectl(['get', 'service', `${RELEASE}-relay`, ...n, '-o', 'jsonpath={.spec.clusterIP}'])
    ).trim();
    const gatewayPods = await readyPods(kubectl, NAMESPACE, GATEWAY_SELECTOR, 2);
    const specs = await kubectl.json<{
      items: Array<{ spec: { containers: Array<{ env?: Array<{ name: string; value?: string }> }> } }>;
    }>(['get', 'pods', ...n, '-l', GATEWAY_SELECTOR]);
    for (const pod of specs.items)
      expect(pod.spec.containers[0]!.env).toContainEqual({
        name: 'PROXYFLEET_RELAY_URL',
        value: `ws://${clusterIp}:8095/changes`,
      });
    // Connected: the API pod and both gateway pods, over the two relays (the node reaches pods on
    // the bridge); the only LISTEN sessions on the database are the relays'.
    const relays = await readyPods(kubectl, NAMESPACE, RELAY_SELECTOR, 2);
    const clients = await eventually(
      'the API pod and both gateway pods to connect to the relays',
      async () => {
        let sum = 0;
        for (const relay of relays) {
          const res = await fetch(`http://${relay.status.podIP}:9093/readyz`, {
            signal: AbortSignal.timeout(5_000),
          });
          sum += ((await res.json()) as { info: { relayClients: number } }).info.relayClients;
        }
        return sum === 3 ? sum : undefined;
      },
    );
    const { rows: listening } = await db.query<{ name: string; sessions: number }>(
      `SELECT application_name AS name, count(*)::int AS sessions FROM pg_stat_activity
        WHERE datname = current_database() AND application_name LIKE 'proxyfleet-%-listen'
        GROUP BY 1 ORDER BY 1`,
    );
    expect(listening).toEqual([{ name: 'proxyfleet-relay-listen', sessions: 2 }]);
    // A password reset: every gateway pod refuses the old password and takes the new one. They
    // hold no LISTEN and read no change themselves: it came through the relay, with the row.
    const r = await customer('relayed', 0.1);
    const at = (pod: Pod) => ({ host: pod.status.podIP!, port: 12321 });
    const through = (pod: Pod, account: Account) =>
      proxyRequest(at(pod), credentials(account), `${origin.url}/bytes/100`, undefined, 5_000);
    for (const pod of gatewayPods)
      await eventually(`${pod.metadata.name} to take the new customer`, async () =>
        (await through(pod, r)).status === 200 ? true : undefined,
      );
    const reset = accountSchema
      .omit({ id: true })
      .parse(await admin('POST', `/admin/v1/accounts/${r.id}/proxy-password/reset`));
    const answered = Date.now();
    const refusedAfter = await Promise.all(
      gatewayPods.map((pod) =>
        eventually(
          `${pod.metadata.name} to refuse the old password`,
          async () => ((await through(pod, r)).status === 407 ? Date.now() - answered : undefined),
          10_000,
          20,
        ),
      ),
    );
    for (const pod of gatewayPods)
      expect(await through(pod, { ...r, ...reset })).toMatchObject({ status: 200 });
    say(
      `relay: Service ${clusterIp}, ${clients} processes connected, LISTEN sessions ${JSON.stringify(listening)}; ` +
        `the old password refused by the gateway pods ${refusedAfter.join(' and ')} ms after the reset answered`,
    );
  }, 120_000);

  test('a request proxied through a gateway pod is billed exactly', async () => {
    let moved = 0;
    for (const size of [1_000, 250_000, 1_500_000]) {
      const r = await proxyRequest(gatewayPort, credentials(a), `${origin.url}/bytes/${size}`);
      expect(r).toMatchObject({ status: 200 });
      moved += r.bytes;
    }
    const billed = await billedWhenSettled(a.id, moved);
    say(`billing: client moved ${moved} B, billed ${billed} B`);
    expect(billed).toBe(moved);
  }, 120_000);

  /** A slow download through the gateway Service; resolves with the gateway pod that serves it. */
  async function slowTransfer(account: Account, bytes: number) {
    const timeline: Array<[number, number]> = [];
    const done = proxyRequest(gatewayPort, credentials(account), `${origin.url}/slow/${bytes}`, (moved) =>
      timeline.push([Date.now(), moved]),
    );
    const peer = await eventually(
      'the transfer to reach the origin',
      async () => origin.slowPeers()[0],
      20_000,
      50,
    );
    const pod = (await pods(kubectl, NAMESPACE, GATEWAY_SELECTOR)).find((p) => p.status.podIP === peer);
    if (!pod) throw new Error(`no gateway pod has the address ${peer}`);
    return { done, timeline, pod };
  }

  test('a gateway pod deleted mid-transfer drains it: the transfer completes, billed exactly; its replacement Ready', async () => {
    const b = await customer('deleted', 0.5);
    const size = 30_000_000;
    const { done, pod } = await slowTransfer(b, size);
    await sleep(2_000);
    // kubectl delete: preStop, then SIGTERM; the gateway stops accepting and drains open requests.
    await kubectl(['delete', 'pod', pod.metadata.name, ...n, '--wait=false']);
    const result = await done;
    const replacement = await readyPods(kubectl, NAMESPACE, GATEWAY_SELECTOR, 2);
    expect(replacement.map((p) => p.metadata.name)).not.toContain(pod.metadata.name);
    const billed = await billedWhenSettled(b.id, result.bytes);
    say(
      `pod deleted mid-transfer: client moved ${result.bytes} B (status ${result.status}), billed ${billed} B`,
    );
    expect(result).toMatchObject({ status: 200 });
    expect(result.bytes).toBeGreaterThan(size);
    expect(billed).toBe(result.bytes);
  }, 300_000);

  test('a gateway killed mid-transfer (SIGKILL): the pod Ready again, the bytes billed within the crash bound', async () => {
    const c = await customer('killed', 0.5);
    const { done, timeline, pod } = await slowTransfer(c, 200_000_000);
    await sleep(4_000);
    const killedAt = Date.now();
    process.kill(await containerPid(pod), 'SIGKILL');
    const result = await done;
    await eventually('the killed gateway to restart and be Ready', async () => {
      const again = (await pods(kubectl, NAMESPACE, GATEWAY_SELECTOR)).find(
        (p) => p.metadata.name === pod.metadata.name,
      );
      return again && isReady(again) && (again.status.containerStatuses?.[0]?.restartCount ?? 0) > 0
        ? again
        : undefined;
    });
    await readyPods(kubectl, NAMESPACE, GATEWAY_SELECTOR, 2);
    const billed = await billedWhenSettled(c.id);
    // docs/adr/0020: a crashed pod loses at most its unflushed usage, the last flush interval
    // (FLUSH_MS, plus the 250 ms counter read and scheduling: FLUSH_MS + 1 s as loadtest/run.ts):
    // under-billing, never more than moved (but for one connection's slack of bytes in flight).
    const before = timeline.filter(([t]) => t <= killedAt - FLUSH_MS - 1_000).pop()?.[1] ?? 0;
    const bound = result.bytes - before;
    say(
      `pod killed: client moved ${result.bytes} B, billed ${billed} B, unbilled ${result.bytes - billed} B, ` +
        `bound ${bound} B (what moved in the last ${(FLUSH_MS + 1000) / 1000} s)`,
    );
    expect(result.bytes).toBeLessThan(200_000_000);
    expect(billed).toBeLessThanOrEqual(result.bytes + PER_CONNECTION_SLACK_BYTES);
    expect(result.bytes - billed).toBeLessThanOrEqual(bound);
  }, 300_000);

  // PROXYFLEET_E2E_ROLLOUTS=N rolls N times in a row under the same clients (docs/adr/0094 records
  // 10); CI rolls once.
  const rollouts = Math.max(1, Number(process.env.PROXYFLEET_E2E_ROLLOUTS ?? 1));
  test(
    'a config change to the ProxyGateway rolls the gateway pods with zero failed requests under load',
    async () => {
      const r = await customer('rolling', 1);
      let stop = false;
      const failures: string[] = [];
      let ok = 0;
      const client = async () => {
        while (!stop) {
          const res = await proxyRequest(
            gatewayPort,
            credentials(r),
            `${origin.url}/bytes/20000`,
            undefined,
            15_000,
          );
          // Which request failed and why: its time, status and error.
          if (res.status === 200 && !res.error) ok++;
          else
            failures.push(
              `${new Date().toISOString()} ${res.status} ${res.proxyStatus ?? ''} ${res.error ?? ''}`.trim(),
            );
          await sleep(20);
        }
      };
      const clients = [client(), client(), client(), client()];
      await sleep(2_000);
      for (let i = 0; i < rollouts; i++) {
        const [okBefore, failedBefore] = [ok, failures.length];
        const before = (await pods(kubectl, NAMESPACE, GATEWAY_SELECTOR)).map((p) => p.metadata.name);
        await kubectl([
          'patch',
          'pgw',
          GATEWAY,
          ...n,
          '--type=merge',
          '-p',
          JSON.stringify({ spec: { session: { defaultMinutes: 11 + (i % 2) } } }),
        ]);
        // Rolled: two Ready pods, none of the old ones left (they drained and exited).
        const after = await eventually(
          'the rollout to finish',
          async () => {
            const list = await pods(kubectl, NAMESPACE, GATEWAY_SELECTOR);
            return list.length === 2 &&
              list.every(isReady) &&
              list.every((p) => !before.includes(p.metadata.name))
              ? list
              : undefined;
          },
          240_000,
        );
        expect(after).toHaveLength(2);
        await sleep(3_000);
        say(
          `rolling update ${i + 1}/${rollouts}: ${ok - okBefore} requests succeeded, ` +
            `${failures.length - failedBefore} failed ${JSON.stringify(failures.slice(failedBefore, failedBefore + 5))}`,
        );
      }
      stop = true;
      await Promise.all(clients);
      say(
        `rolling update: ${rollouts} rollout(s), ${ok} requests succeeded, ${failures.length} failed ${JSON.stringify(failures.slice(0, 5))}`,
      );
      expect(ok).toBeGreaterThan(50);
      expect(failures).toEqual([]);
    },
    400_000 * rollouts,
  );

  test('scaling: the HPA scales the gateway pods on CPU (metrics-server) under load', async () => {
    const d = await customer('scaled', 2);
    await kubectl(
      ['apply', '-f', '-'],
      proxyGatewayYaml(
        '  replicas: { min: 2, max: 3 }\n  autoscaling: { targetCPUUtilizationPercent: 20 }\n',
      ),
    );
    let stop = false;
    const load = async () => {
      while (!stop)
        await proxyRequest(gatewayPort, credentials(d), `${origin.url}/bytes/200000`, undefined, 15_000);
    };
    const clients = [load(), load(), load(), load()];
    try {
      const scaled = await eventually(
        'the HPA to scale the gateway to 3 pods',
        async () => {
          const hpa = await kubectl.json<{
            status?: { desiredReplicas?: number; currentMetrics?: unknown[] };
          }>(['get', 'hpa', `${GATEWAY}-gateway`, ...n]);
          return (hpa.status?.desiredReplicas ?? 0) >= 3 ? hpa : undefined;
        },
        240_000,
        2_000,
      );
      say(`HPA: ${JSON.stringify(scaled.status?.currentMetrics)}`);
      await readyPods(kubectl, NAMESPACE, GATEWAY_SELECTOR, 3);
      const ready = await eventually('the ProxyGateway to count 3 pods', async () => {
        const v = (await kubectl(['get', 'pgw', GATEWAY, ...n, '-o', 'jsonpath={.status.ready}'])).trim();
        return v === '3/3' ? v : undefined;
      });
      expect(ready).toBe('3/3');
    } finally {
      stop = true;
      await Promise.all(clients);
    }
  }, 400_000);

  exitSteps(() => ({
    kubectl,
    releaseNamespace: NAMESPACE,
    databaseSecret: `${RELEASE}-database`,
    origin,
    say,
    datacenterCustomer: async (name, gb) => {
      const account = await customer(name, gb, 'datacenter');
      return { user: account.proxyUsername, password: account.proxyPassword };
    },
  }));

  httpsSteps(() => ({
    kubectl,
    kubeconfig: kubeconfigPath,
    namespace: NAMESPACE,
    release: RELEASE,
    db,
    admin,
    say,
  }));

  uninstallSteps(() => ({
    kubectl,
    namespace: NAMESPACE,
    again: AGAIN,
    release: RELEASE,
    install: (namespace) => kubectl.helm([...installArgs(namespace), '--set', 'api.service.type=ClusterIP']),
  }));

  // Last: this release's operator, gone now, watched every namespace (upgrade.ts).
  upgradeSteps(() => ({ kubectl, origin, say }));
});
