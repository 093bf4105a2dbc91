// The e2e steps of an upgrade from the previous release and of the rollback to it (docs/operator.md
// "Upgrades and rollback", docs/adr/0124): the previous release (migrations/previous-release.json,
// found by its tag, else its commit) installed from its own chart with its own image
// (scripts/previous-release.sh), then `helm upgrade` to this tree's chart and image and
// `helm rollback` to the previous release, each under proxy and API clients that never stop:
// no request may fail, every byte the clients moved is billed once, every migration is applied by
// one pod once, and the previous release's pods run on the schema the upgrade left.
// Registered by chart.e2e.test.ts after its own release is gone: that release's operator watches
// every namespace and would reconcile this one's ProxyGateway too. This one's operator watches its
// own namespace only, with its own database and release name.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { z } from 'zod';
import { loadMigrations } from '#common/db/migrate.ts';
import { loadPreviousRelease, type PreviousRelease } from '#common/db/migration-rule.ts';
import { REPO_ROOT } from '../process.ts';
import {
  accepts,
  adminApi,
  CLUSTER_PG_PORT,
  eventually,
  isReady,
  NODE_IP,
  pods,
  proxyRequest,
  readyPods,
  sleep,
  type Kubectl,
  VERSION,
  type Origin,
} from './cluster.ts';

const run = promisify(execFile);

/** Removes the proxyfleet CRDs, whichever release left them (and with them any object left). */
const dropCrds = (kubectl: Kubectl) =>
  kubectl([
    'delete',
    'crd',
    'proxygateways.proxyfleet.io',
    'apikeys.proxyfleet.io',
    '--ignore-not-found',
    '--wait=true',
    '--timeout=120s',
  ]);

export interface UpgradeContext {
  kubectl: Kubectl;
  origin: Origin;
  say: (line: string) => void;
}

/** This tree's image, as chart.e2e.test.ts installs it (`npm run image`, loaded by `npm run cluster -- up`). */
const IMAGE = `localhost/proxyfleet:${VERSION}`;
const RELEASE = `proxyfleet-up-${process.pid}`;
const NAMESPACE = `e2e-upgrade-${process.pid}`;
const DATABASE = `e2e_upgrade_${Date.now()}_${process.pid}`;
const ADMIN_TOKEN = randomBytes(24).toString('hex');
const CREDENTIALS_KEY = randomBytes(32).toString('hex');
const GATEWAY = 'upgraded';
const GATEWAY_SELECTOR = `proxyfleet.io/proxygateway=${GATEWAY}`;
const n = ['-n', NAMESPACE];
const accountSchema = z.object({ id: z.string(), proxyUsername: z.string(), proxyPassword: z.string() });
/** The pod sets of the release: component selector and how many Ready pods it runs. */
const COMPONENTS: Array<[string, number]> = [
  ['app.kubernetes.io/name=proxyfleet-api', 1],
  ['app.kubernetes.io/name=proxyfleet-worker', 1],
  ['app.kubernetes.io/name=proxyfleet-controller', 1],
  ['app.kubernetes.io/name=proxyfleet-relay', 2],
  [GATEWAY_SELECTOR, 2],
];

/** The values of both releases: only the chart and the image differ. */
const values = (image: string) =>
  [
    `image.repository=${image.slice(0, image.lastIndexOf(':'))}`,
    `image.tag=${image.slice(image.lastIndexOf(':') + 1)}`,
    'image.pullPolicy=Never',
    `database.url=postgresql://postgres@${NODE_IP}:${CLUSTER_PG_PORT}/${DATABASE}`,
    `apiSecrets.adminToken=${ADMIN_TOKEN}`,
    `apiSecrets.credentialsKey=${CREDENTIALS_KEY}`,
    'api.replicas=1',
    'api.service.type=NodePort',
    'api.dashboardUrl=https://dashboard.e2e.example.test',
    'worker.replicas=1',
    'controller.replicas=1',
    `controller.watchNamespaces={${NAMESPACE}}`,
    `controller.gatewayAllowCidrs={${NODE_IP}/32}`,
    'relay.address=serviceEnv',
  ].flatMap((v) => ['--set', v]);

interface Traffic {
  stop(): Promise<{ requests: number; failures: string[]; bytes: number; apiCalls: number }>;
}

export function upgradeSteps(context: () => UpgradeContext): void {
  describe('upgrade from the previous release and rollback, under traffic', () => {
    let c: UpgradeContext;
    let kubectl: Kubectl;
    let db: pg.Pool;
    let previous: PreviousRelease;
    let previousImage: string;
    let previousChart: string;
    let apiUrl: string;
    let gatewayPort: number;
    let account: z.infer<typeof accountSchema>;
    let apiKey: string;
    /** Bytes the clients moved through the gateway so far, over every step. */
    let moved = 0;

    const admin = adminApi(() => apiUrl, ADMIN_TOKEN);

    /** Proxy clients through the gateway NodePort and API clients (customer and admin), until stopped. */
    function traffic(): Traffic {
      let stopped = false;
      let [requests, bytes, apiCalls] = [0, 0, 0];
      const failures: string[] = [];
      const failed = (what: string) => failures.push(`${new Date().toISOString()} ${what}`);
      const proxyClient = async () => {
        while (!stopped) {
          const credentials = `${account.proxyUsername}:${account.proxyPassword}`;
          const r = await proxyRequest(
            gatewayPort,
            credentials,
            `${c.origin.url}/bytes/20000`,
            undefined,
            15_000,
          );
          requests++;
          bytes += r.bytes;
          if (r.status !== 200 || r.error)
            failed(`proxy ${r.status} ${r.proxyStatus ?? ''} ${r.error ?? ''}`);
          await sleep(20);
        }
      };
      const apiClient = async (route: string, headers: Record<string, string>) => {
        while (!stopped) {
          apiCalls++;
          try {
            const res = await fetch(`${apiUrl}${route}`, { headers, signal: AbortSignal.timeout(15_000) });
            await res.arrayBuffer();
            if (res.status !== 200) failed(`api ${route} ${res.status}`);
          } catch (err) {
            failed(
              `api ${route} ${(err as Error).message} ${(err as { cause?: { code?: string } }).cause?.code ?? ''}`,
            );
          }
          await sleep(100);
        }
      };
      const clients = [
        proxyClient(),
        proxyClient(),
        proxyClient(),
        proxyClient(),
        apiClient('/api/v1/usage', { 'x-api-key': apiKey }),
        apiClient(`/admin/v1/accounts/${account.id}`, { authorization: `Bearer ${ADMIN_TOKEN}` }),
      ];
      return {
        async stop() {
          stopped = true;
          await Promise.all(clients);
          return { requests, failures, bytes, apiCalls };
        },
      };
    }

    /** balances.used_bytes of the account once it equals `expected` or stopped changing for 6 s. */
    async function billed(expected: number): Promise<number> {
      let [last, since] = [-1, Date.now()];
      return eventually(
        'the billed bytes to settle',
        async () => {
          const { rows } = await db.query<{ used: string }>(
            `SELECT used_bytes::text AS used FROM balances WHERE account_id = $1 AND product = 'basic'`,
            [account.id],
          );
          const used = Number(rows[0]?.used ?? 0);
          if (used !== last) [last, since] = [used, Date.now()];
          return used === expected || Date.now() - since > 6_000 ? used : undefined;
        },
        90_000,
      );
    }

    /** Every pod set Ready at its count, every pod (gateways too) on `image`, none terminating. */
    async function allOn(image: string) {
      return eventually(
        `every pod of the release on ${image}`,
        async () => {
          for (const [selector, count] of COMPONENTS) {
            const list = await kubectl.json<{
              items: Array<{ spec: { containers: Array<{ image: string }> } }>;
            }>(['get', 'pods', ...n, '-l', selector]);
            const ready = await pods(kubectl, NAMESPACE, selector);
            if (list.items.length !== count || !ready.every(isReady)) return undefined;
            if (!list.items.every((p) => p.spec.containers[0]!.image === image)) return undefined;
          }
          return true;
        },
        360_000,
        1_000,
      );
    }

    /** What each running pod's schema step logged at its start: the migrations and function files it applied. */
    async function schemaLogs(): Promise<Array<{ pod: string; applied: number[]; functions: string[] }>> {
      const out: Array<{ pod: string; applied: number[]; functions: string[] }> = [];
      for (const pod of await pods(kubectl, NAMESPACE, 'app.kubernetes.io/part-of=proxyfleet')) {
        const logs = await kubectl(['logs', pod.metadata.name, ...n]);
        for (const line of logs.split('\n')) {
          if (!line.includes('"migrations applied"') && !line.includes('"schema up to date"')) continue;
          const entry = JSON.parse(line) as { applied: number[]; functions: string[] };
          out.push({ pod: pod.metadata.name, applied: entry.applied, functions: entry.functions });
        }
      }
      return out;
    }

    /** The schema step of the pods, in one line: how many logged it, and what any of them applied. */
    const schemaStep = (logs: Awaited<ReturnType<typeof schemaLogs>>) =>
      `${new Set(logs.map((l) => l.pod)).size} pods logged their schema step, applying ` +
      JSON.stringify(logs.filter((l) => l.applied.length || l.functions.length));

    const schemaRows = async () =>
      (
        await db.query<{ version: number; applied_at: Date }>(
          'SELECT version, applied_at FROM schema_migrations ORDER BY version',
        )
      ).rows;

    beforeAll(async () => {
      c = context();
      kubectl = c.kubectl;
      previous = await loadPreviousRelease();
      const { stdout } = await run('bash', [path.join(REPO_ROOT, 'scripts/previous-release.sh'), IMAGE], {
        cwd: REPO_ROOT,
        timeout: 900_000,
        maxBuffer: 64 << 20,
      });
      const [image, tree] = stdout.trim().split('\n').pop()!.split(' ');
      [previousImage, previousChart] = [image!, path.join(tree!, 'charts/proxyfleet')];
      const server = new pg.Pool({
        connectionString: `postgresql://postgres@127.0.0.1:${CLUSTER_PG_PORT}/postgres`,
      });
      await server.query(`CREATE DATABASE ${DATABASE}`);
      await server.end();
      db = new pg.Pool({
        connectionString: `postgresql://postgres@127.0.0.1:${CLUSTER_PG_PORT}/${DATABASE}`,
        max: 2,
      });
      await kubectl(['create', 'namespace', NAMESPACE]);
      // A cluster that ran the previous release has its CRDs (v1alpha1 only); the releases of the
      // steps before kept theirs (this tree's, whose webhook is gone with them): the previous
      // release installs its own, and the upgrade and the rollback carry them (docs/adr/0121).
      await dropCrds(kubectl);
    }, 900_000);

    afterAll(async () => {
      // The custom resources while their operator still runs (it removes its finalizers), then the release.
      await kubectl?.(['delete', 'pgw,ak', '--all', ...n, '--wait=true', '--timeout=120s']).catch(
        () => undefined,
      );
      await kubectl
        ?.helm(['uninstall', RELEASE, ...n, '--wait', '--ignore-not-found'])
        .catch(() => undefined);
      await kubectl?.([
        'delete',
        'namespace',
        NAMESPACE,
        '--wait=true',
        '--timeout=120s',
        '--ignore-not-found',
      ]).catch(() => undefined);
      await db?.end();
      const server = new pg.Pool({
        connectionString: `postgresql://postgres@127.0.0.1:${CLUSTER_PG_PORT}/postgres`,
      });
      await server.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`).catch(() => undefined);
      await server.end();
      // Kept by the uninstall, they would be the previous release's in the next run's cluster.
      if (kubectl) await dropCrds(kubectl).catch(() => undefined);
    }, 300_000);

    test('the previous release installs from its own chart and image: pods Ready, a gateway serving', async () => {
      const t0 = Date.now();
      await kubectl.helm([
        'install',
        RELEASE,
        previousChart,
        ...n,
        ...values(previousImage),
        '--wait',
        '--timeout',
        '5m',
      ]);
      apiUrl = `http://127.0.0.1:${(await kubectl(['get', 'service', `${RELEASE}-api`, ...n, '-o', 'jsonpath={.spec.ports[0].nodePort}'])).trim()}`;
      await eventually('the API /readyz', async () =>
        (await fetch(`${apiUrl}/readyz`)).ok ? true : undefined,
      );
      account = accountSchema.parse(
        await admin('POST', '/admin/v1/accounts', { email: `upgrade-${process.pid}@e2e.example` }),
      );
      await admin('POST', `/admin/v1/accounts/${account.id}/purchases`, { product: 'basic', gb: 2 });
      apiKey = z
        .object({ apiKey: z.string() })
        .parse(await admin('POST', `/admin/v1/accounts/${account.id}/keys`, { name: 'upgrade' })).apiKey;
      await kubectl(
        ['apply', '-f', '-'],
        `apiVersion: proxyfleet.io/v1alpha1
kind: ProxyGateway
metadata: { name: ${GATEWAY}, namespace: ${NAMESPACE} }
spec:
  plan: basic
  port: 12321
  advertisedHost: upgrade.proxy.e2e.example
  exits: [{ name: direct, country: '*' }]
  service: { type: NodePort }
  replicas: { min: 2, max: 2 }
  resources: { requests: { cpu: 50m, memory: 96Mi } }
`,
      );
      await readyPods(kubectl, NAMESPACE, GATEWAY_SELECTOR, 2, 300_000);
      await allOn(previousImage);
      gatewayPort = Number(
        await kubectl([
          'get',
          'service',
          `${GATEWAY}-gateway`,
          ...n,
          '-o',
          'jsonpath={.spec.ports[0].nodePort}',
        ]),
      );
      await eventually('kube-proxy to route the gateway NodePort', () => accepts(gatewayPort));
      const credentials = `${account.proxyUsername}:${account.proxyPassword}`;
      const first = await eventually('a first proxied request', async () => {
        const r = await proxyRequest(
          gatewayPort,
          credentials,
          `${c.origin.url}/bytes/1000`,
          undefined,
          10_000,
        );
        return r.status === 200 ? r : undefined;
      });
      // Only the answered request is billed: the refusals before the gateway knew the account are not.
      moved += first.bytes;
      expect(first.status).toBe(200);
      const rows = await schemaRows();
      expect(rows.at(-1)?.version).toBe(previous.lastMigration);
      c.say(
        `upgrade: ${previous.release} (${previousImage}) installed in ${((Date.now() - t0) / 1000).toFixed(1)} s, ` +
          `${rows.length} migrations, the newest ${previous.lastMigration}`,
      );
    }, 600_000);

    test("helm upgrade to this tree's chart and image under traffic: 0 failed requests, billed once, each migration applied once", async () => {
      const before = await schemaRows();
      const load = traffic();
      await sleep(3_000);
      const t0 = Date.now();
      await kubectl.helm([
        'upgrade',
        RELEASE,
        path.join(REPO_ROOT, 'charts/proxyfleet'),
        ...n,
        ...values(IMAGE),
        '--wait',
        '--timeout',
        '6m',
      ]);
      const helmSeconds = (Date.now() - t0) / 1000;
      // The gateway pods roll after: their operator, once upgraded, gives them its image.
      await allOn(IMAGE);
      const rolledSeconds = (Date.now() - t0) / 1000;
      await sleep(3_000);
      const { requests, failures, bytes, apiCalls } = await load.stop();
      moved += bytes;
      const billedBytes = await billed(moved);
      const after = await schemaRows();
      const mine = (await loadMigrations()).map((m) => m.version);
      const logs = await schemaLogs();
      const appliedByPods = logs.flatMap((l) => l.applied);
      const added = after.filter((r) => !before.some((b) => b.version === r.version)).map((r) => r.version);
      c.say(
        `upgrade ${previous.release} -> this tree: helm upgrade --wait ${helmSeconds.toFixed(1)} s, every pod (gateways too) on the new image after ` +
          `${rolledSeconds.toFixed(1)} s; ${requests} proxy requests and ${apiCalls} API calls, ${failures.length} failed ` +
          `${JSON.stringify(failures.slice(0, 5))}; the clients moved ${bytes} B (the account ${moved} B in all), billed ${billedBytes} B; ` +
          `migrations added ${JSON.stringify(added)}; ${schemaStep(logs)}`,
      );
      expect(failures).toEqual([]);
      expect(requests).toBeGreaterThan(50);
      expect(billedBytes).toBe(moved);
      // Each of this tree's migrations once in the table, the previous release's untouched, the new
      // ones applied by exactly one of the new pods.
      expect(after.map((r) => r.version)).toEqual(mine);
      expect(after.filter((r) => r.version <= previous.lastMigration)).toEqual(before);
      expect(added).toEqual(mine.filter((v) => v > previous.lastMigration));
      expect([...appliedByPods].sort((a, b) => a - b)).toEqual(added);
      // Read from the new pods' logs: the api, the worker and both relays migrate at start.
      expect(new Set(logs.map((l) => l.pod)).size).toBeGreaterThanOrEqual(4);
    }, 900_000);

    test('helm rollback to the previous release under traffic: its pods run on the upgraded schema, 0 failed requests, billed once', async () => {
      const before = await schemaRows();
      const load = traffic();
      await sleep(3_000);
      const t0 = Date.now();
      // A plain `helm rollback` is refused: the previous CRDs have no spec.conversion, and the
      // caBundle the controller patched in (its own field) would stay without a strategy. As
      // docs/operator.md says: stop the operator, put the CRDs' conversion back to None, roll back.
      await kubectl(['scale', 'deployment', `${RELEASE}-controller`, ...n, '--replicas=0']);
      await eventually('the controller pods to stop', async () =>
        (await pods(kubectl, NAMESPACE, 'app.kubernetes.io/name=proxyfleet-controller')).length === 0
          ? true
          : undefined,
      );
      for (const crd of ['proxygateways.proxyfleet.io', 'apikeys.proxyfleet.io'])
        await kubectl([
          'patch',
          'crd',
          crd,
          '--type=merge',
          '-p',
          '{"spec":{"conversion":{"strategy":"None","webhook":null}}}',
        ]);
      await kubectl.helm(['rollback', RELEASE, '1', ...n, '--wait', '--timeout', '6m']);
      const helmSeconds = (Date.now() - t0) / 1000;
      await allOn(previousImage);
      const rolledSeconds = (Date.now() - t0) / 1000;
      await sleep(3_000);
      const { requests, failures, bytes, apiCalls } = await load.stop();
      moved += bytes;
      const billedBytes = await billed(moved);
      const after = await schemaRows();
      const logs = await schemaLogs();
      c.say(
        `rollback to ${previous.release}: helm rollback --wait ${helmSeconds.toFixed(1)} s, every pod on ${previousImage} after ` +
          `${rolledSeconds.toFixed(1)} s; ${requests} proxy requests and ${apiCalls} API calls, ${failures.length} failed ` +
          `${JSON.stringify(failures.slice(0, 5))}; the clients moved ${bytes} B (the account ${moved} B in all), billed ${billedBytes} B; ` +
          `schema_migrations ${before.length} rows before, ${after.length} after; ${schemaStep(logs)}`,
      );
      expect(failures).toEqual([]);
      expect(requests).toBeGreaterThan(50);
      expect(billedBytes).toBe(moved);
      // Nothing is un-applied: migrations are forward-only, the old pods apply none of theirs.
      expect(after).toEqual(before);
      expect(logs.flatMap((l) => l.applied)).toEqual([]);
      expect(new Set(logs.map((l) => l.pod)).size).toBeGreaterThanOrEqual(4);
    }, 900_000);
  });
}
