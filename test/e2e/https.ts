// The e2e steps of HTTPS for the API and dashboard (docs/operator.md, "HTTPS for the API and
// dashboard"; docs/adr/0123): the release gets the chart's Ingress (api.ingress) with TLS from a
// Secret, a real ingress controller serves it, and the dashboard is signed in over HTTPS through it
// in Chromium. The controller is Traefik (scripts/install-tools.sh), run as a process on the node
// with the cluster's kubeconfig, not as a pod: it reads the Ingress, its IngressClass and its
// Secret from the API server as an in-cluster controller does and proxies to the API pod's address
// on the bridge, so the API sees it connect from the node's address, which api.trustedProxies names.
// Registered by chart.e2e.test.ts, which owns the release these steps run against.
import { spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { expect, test } from '@jest/globals';
import type pg from 'pg';
import { hashPassword } from '#api/modules/dashboard/passwords.ts';
import { launchChromium, newContext, signIn, STRONG } from '../dashboard.ts';
import { toolsBinDir } from '../kube/env.ts';
import { freePort } from '../ports.ts';
import { REPO_ROOT } from '../process.ts';
import { createTestCa } from '../tls.ts';
import { eventually, isReady, NODE_IP, pods, readyPods, type Kubectl } from './cluster.ts';

/** The host of the release's api.dashboardUrl (chart.e2e.test.ts installs it). */
const HOST = 'dashboard.e2e.example.test';
const SECRET = 'proxyfleet-api-e2e-tls';
const HSTS = 'max-age=31536000; includeSubDomains';

export interface HttpsContext {
  kubectl: Kubectl;
  kubeconfig: string;
  namespace: string;
  release: string;
  db: pg.Pool;
  admin: (method: string, route: string, body?: unknown) => Promise<unknown>;
  say: (line: string) => void;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  fingerprint256: string;
}

/** One GET to the controller's HTTPS port for HOST, trusting only `ca`. */
function viaIngress(port: number, ca: Buffer, pathName: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      {
        host: '127.0.0.1',
        port,
        path: pathName,
        servername: HOST,
        headers: { host: `${HOST}:${port}` },
        ca,
        agent: false,
        timeout: 20_000,
      },
      (res) => {
        const socket = res.socket as TLSSocket;
        const fingerprint256 = new X509Certificate(socket.getPeerCertificate(true).raw).fingerprint256;
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, fingerprint256 }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

function startTraefik(kubeconfig: string, namespace: string, ingressClass: string, port: number) {
  const output: string[] = [];
  const child: ChildProcess = spawn(
    path.join(toolsBinDir(), 'traefik'),
    [
      `--entryPoints.websecure.address=127.0.0.1:${port}`,
      '--entryPoints.websecure.http.tls=true',
      '--providers.kubernetesingress=true',
      `--providers.kubernetesingress.namespaces=${namespace}`,
      `--providers.kubernetesingress.ingressclass=${ingressClass}`,
      '--global.checknewversion=false',
      '--global.sendanonymoususage=false',
      '--log.level=INFO',
    ],
    {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, KUBECONFIG: kubeconfig },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const keep = (chunk: Buffer) => void output.push(chunk.toString());
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, output };
}

export function httpsSteps(ctx: () => HttpsContext): void {
  test('HTTPS through a real ingress controller (Traefik, TLS from a Secret): the dashboard signs in in Chromium, with HSTS and Secure cookies; the same header from a pod is ignored', async () => {
    const { kubectl, kubeconfig, namespace, release, db, admin, say } = ctx();
    const n = ['-n', namespace];
    expect(existsSync(path.join(toolsBinDir(), 'traefik'))).toBe(true);
    const ingressClass = `proxyfleet-e2e-${process.pid}`;
    const ca = await createTestCa();
    let traefik: ReturnType<typeof startTraefik> | undefined;
    try {
      const leaf = await ca.issue('dashboard', [HOST]);
      await kubectl([
        'create',
        'secret',
        'tls',
        SECRET,
        ...n,
        `--cert=${leaf.certFile}`,
        `--key=${leaf.keyFile}`,
      ]);
      await kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'networking.k8s.io/v1',
          kind: 'IngressClass',
          metadata: { name: ingressClass },
          spec: { controller: 'traefik.io/ingress-controller' },
        }),
      );
      const t0 = Date.now();
      await kubectl.helm([
        'upgrade',
        release,
        path.join(REPO_ROOT, 'charts/proxyfleet'),
        ...n,
        '--reuse-values',
        ...[
          // Traefik runs on the node: it reaches the API pod from the node's bridge address.
          `api.trustedProxies={${NODE_IP}/32}`,
          'api.ingress.enabled=true',
          `api.ingress.className=${ingressClass}`,
          `api.ingress.hosts={${HOST}}`,
          `api.ingress.tls.secretName=${SECRET}`,
        ].flatMap((v) => ['--set', v]),
        '--wait',
        '--timeout',
        '5m',
      ]);
      say(`helm upgrade with api.ingress: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      // helm's --wait ends once the new API pod is Ready; the old one drains a few seconds more and,
      // terminating but serving, can still be behind the Ingress: its pages carry no HSTS and its
      // pre-session cookie is not the __Host- one the new pod reads (a CI run's sign-in failed there).
      await eventually(
        'the previous API pod to be gone',
        async () => {
          const api = await pods(kubectl, namespace, 'app.kubernetes.io/name=proxyfleet-api');
          return api.length === 1 && !api[0]!.metadata.deletionTimestamp && isReady(api[0]!)
            ? true
            : undefined;
        },
        180_000,
      );
      const ingress = await kubectl.json<{ spec: { tls: { secretName: string }[] } }>([
        'get',
        'ingress',
        `${release}-api`,
        ...n,
      ]);
      expect(ingress.spec.tls[0]!.secretName).toBe(SECRET);

      const port = await freePort();
      traefik = startTraefik(kubeconfig, namespace, ingressClass, port);
      // Ready once the router from the Ingress answers (Traefik's own 404 before that).
      const first = await eventually(
        'Traefik to route the Ingress',
        async () => {
          const res = await viaIngress(port, ca.ca, '/sign-in').catch(() => undefined);
          return res?.status === 200 ? res : undefined;
        },
        120_000,
        1_000,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\n${traefik!.output.join('').slice(-4000)}`);
      });
      // The certificate is the Secret's (not Traefik's default); HSTS and the Secure pre-session cookie.
      expect(first.fingerprint256).toBe(leaf.fingerprint256);
      expect(first.headers['strict-transport-security']).toBe(HSTS);
      const pre = (first.headers['set-cookie'] as string[]).find((c) => c.startsWith('__Host-pf_pre='));
      expect(pre).toMatch(/; Secure/);

      const email = `https-${process.pid}@e2e.example`;
      const account = (await admin('POST', '/admin/v1/accounts', { email })) as { id: string };
      await db.query('INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, $2)', [
        account.id,
        await hashPassword(STRONG),
      ]);
      const base = `https://${HOST}:${port}`;
      const browser = await launchChromium({
        args: [
          `--host-resolver-rules=MAP ${HOST} 127.0.0.1`,
          // Trusts this one certificate, as a browser trusts a real CA's.
          `--ignore-certificate-errors-spki-list=${leaf.spkiSha256}`,
        ],
      });
      try {
        const context = await newContext(browser, base);
        const page = await context.newPage();
        const hsts: (string | undefined)[] = [];
        page.on('response', (res) => {
          if (res.url().startsWith(base)) hsts.push(res.headers()['strict-transport-security']);
        });
        await signIn(page, email, STRONG);
        await page.waitForURL(`${base}/`).catch(async (err: Error) => {
          const text = (
            await page
              .locator('body')
              .innerText()
              .catch(() => '')
          ).slice(0, 500);
          throw new Error(`${err.message}\nthe page: ${page.url()}\n${text}`);
        });
        await expect(page.getByRole('button', { name: 'Sign out', exact: true }).isVisible()).resolves.toBe(
          true,
        );
        const cookies = await context.cookies(base);
        expect(cookies.find((c) => c.name === '__Host-pf_session')).toMatchObject({
          secure: true,
          httpOnly: true,
          path: '/',
        });
        expect(cookies.filter((c) => c.name.startsWith('pf_'))).toEqual([]);
        expect(hsts.length).toBeGreaterThan(2);
        expect(hsts.every((h) => h === HSTS)).toBe(true);
        say(`signed in over HTTPS through Traefik: ${hsts.length} responses, all with HSTS`);
      } finally {
        await browser.close();
      }

      // A pod that reaches the API directly (the API pod itself, from its own address) and forges
      // the header gets neither HSTS nor a Secure cookie.
      const [api] = await readyPods(kubectl, namespace, 'app.kubernetes.io/name=proxyfleet-api', 1);
      const podIp = api!.status.podIP!;
      const script =
        `const r = await fetch('http://${podIp}:8080/sign-in', { headers: { 'x-forwarded-proto': 'https' } });` +
        `console.log(JSON.stringify({ hsts: r.headers.get('strict-transport-security'), cookies: r.headers.getSetCookie() }));`;
      const forged = JSON.parse(
        await kubectl([
          'exec',
          ...n,
          api!.metadata.name,
          '-c',
          'api',
          '--',
          'node',
          '--input-type=module',
          '-e',
          script,
        ]),
      ) as { hsts: string | null; cookies: string[] };
      expect(forged.hsts).toBeNull();
      expect(forged.cookies.length).toBeGreaterThan(0);
      expect(forged.cookies.filter((c) => /Secure|^__Host-/.test(c))).toEqual([]);
    } finally {
      traefik?.child.kill('SIGTERM');
      await kubectl(['delete', 'secret', SECRET, ...n, '--ignore-not-found']).catch(() => undefined);
      await kubectl(['delete', 'ingressclass', ingressClass, '--ignore-not-found']).catch(() => undefined);
      await ca.remove();
    }
  }, 600_000);
}
