// A real control plane for controller tests, the way controller-runtime's envtest runs one: etcd
// and kube-apiserver built from Go modules by scripts/install-tools.sh, on free 127.0.0.1 ports,
// token authentication (one user in system:masters, one bound only to the chart's RBAC), the CRDs
// applied and Established. There is no controller-manager: no garbage collection, no pods.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { jestHooks } from '../hooks.ts';
import { freePort } from '../ports.ts';
import { promisify } from 'node:util';
import { parse, parseAllDocuments } from 'yaml';
import { Registry } from 'prom-client';
import { createLogger } from '#common/logger.ts';
import { ConversionWebhook, CONVERT_PATH } from '../../controllers/src/conversion/server.ts';
import { createCertificate } from '../../controllers/src/conversion/x509.ts';

const run = promisify(execFile);

export const REPO_ROOT = path.resolve(import.meta.dirname, '../..');
export const CHART_DIR = path.join(REPO_ROOT, 'charts/proxyfleet');
export const CRD_FILES = ['crds/proxygateway.yaml', 'crds/apikey.yaml'].map((f) => path.join(REPO_ROOT, f));
/** The namespace the chart is rendered into in tests (its Lease lives there). */
export const RELEASE_NAMESPACE = 'proxyfleet-system';
/** The user the controller runs as in tests: bound only to the chart's ClusterRole and Role. */
export const OPERATOR_USER = 'proxyfleet-operator';

/** scripts/install-tools.sh's output: PROXYFLEET_TOOLS_BIN (.ci/run), else PROXYFLEET_TOOLS_DIR/bin, else the default cache. */
export const toolsBinDir = () =>
  process.env.PROXYFLEET_TOOLS_BIN ||
  path.join(process.env.PROXYFLEET_TOOLS_DIR ?? path.join(os.homedir(), '.cache/proxyfleet/tools'), 'bin');

const REQUIRED_TOOLS = ['etcd', 'kube-apiserver', 'kubectl', 'helm'] as const;
export const tool = (name: (typeof REQUIRED_TOOLS)[number]) => path.join(toolsBinDir(), name);

export function missingKubeTools(): string[] {
  return REQUIRED_TOOLS.filter((t) => !existsSync(tool(t)));
}

export interface KubeEnv {
  server: string;
  /** kubeconfig files for kubectl/helm and for KubeConfig.loadFromFile. */
  adminKubeconfig: string;
  operatorKubeconfig: string;
  adminToken: string;
  operatorToken: string;
  /** Restarts nothing; stops etcd and the apiserver and removes the temporary directory. */
  stop(): Promise<void>;
  kubectl(args: string[], options?: { input?: string; asOperator?: boolean }): Promise<string>;
  /** kubectl apply --server-side of a YAML text, as the admin. */
  apply(yamlText: string): Promise<string>;
  /** The conversion webhook the CRDs call (v1alpha1 <-> v1beta1), served from this process. */
  webhookUrl: string;
}

/**
 * The controller's conversion webhook, served in the test process with a certificate for
 * 127.0.0.1 (the API server runs on the host: the CRDs' clientConfig is a url, not a Service).
 * conversion.int.test.ts runs the controller's own certificate loop instead.
 */
async function startTestWebhook(): Promise<{ url: string; caBundle: string; close(): Promise<void> }> {
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + 86_400_000);
  const ca = createCertificate({ commonName: 'test webhook CA', notBefore, notAfter });
  const serving = createCertificate({
    commonName: '127.0.0.1',
    hosts: ['127.0.0.1'],
    notBefore,
    notAfter,
    issuer: ca,
  });
  const webhook = new ConversionWebhook(new Registry(), createLogger('controller', 'silent'));
  const port = await webhook.listen(serving, 0, '127.0.0.1');
  return {
    url: `https://127.0.0.1:${port}${CONVERT_PATH}`,
    caBundle: Buffer.from(ca.cert).toString('base64'),
    close: () => webhook.close(),
  };
}

/** A CRD of crds/ with its conversion webhook at `url` (JSON, which kubectl takes as YAML). */
export function crdWithWebhookUrl(yamlText: string, url: string, caBundle: string): string {
  const crd = parse(yamlText) as { spec: { conversion?: { webhook?: { clientConfig?: unknown } } } };
  if (crd.spec.conversion?.webhook) crd.spec.conversion.webhook.clientConfig = { url, caBundle };
  return JSON.stringify(crd);
}

interface Proc {
  child: ChildProcess;
  output: string[];
}

function startProcess(cmd: string, args: string[]): Proc {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString());
    if (output.length > 200) output.shift();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.on('error', (err) => output.push(`spawn error: ${err.message}`));
  return { child, output };
}

async function stopProcess(proc: Proc | undefined): Promise<void> {
  if (!proc || proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.child.once('exit', () => resolve()));
  proc.child.kill('SIGTERM');
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/**
 * Polls `probe` until it answers true. Its other answers (a status and body, or the error) are kept,
 * and the last one is part of the timeout's message beside the process's own output: a probe that
 * only said "no" left a CI failure of etcd unexplained.
 */
async function waitFor(
  what: string,
  proc: Proc,
  probe: () => Promise<true | string>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  for (;;) {
    if (proc.child.exitCode !== null) {
      throw new Error(`${what} exited with ${proc.child.exitCode}:\n${proc.output.join('').slice(-4000)}`);
    }
    const answer = await probe().catch((err: unknown) => `error: ${describeError(err)}`);
    if (answer === true) return;
    last = answer;
    if (Date.now() > deadline)
      throw new Error(
        `${what} not ready after ${timeoutMs} ms; the last probe said: ${last}\n${proc.output.join('').slice(-4000)}`,
      );
    await new Promise((r) => setTimeout(r, 200));
  }
}

const describeError = (err: unknown): string =>
  err instanceof Error
    ? `${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}`
    : String(err);

/** true for a 200, else the status and the start of the body. */
const okOr = (status: number, body: string): true | string =>
  status === 200 || `${status} ${body.slice(0, 300)}`;

/** GET over HTTPS without verifying the self-generated serving certificate (test-only). */
async function insecureGet(url: string, token?: string): Promise<{ status: number; body: string }> {
  const https = await import('node:https');
  return new Promise((resolve, reject) => {
    const req = https.get(
      url,
      {
        rejectUnauthorized: false,
        headers: token ? { authorization: `Bearer ${token}` } : {},
        timeout: 5_000,
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

export function kubeconfigYaml(server: string, token: string, user: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: test',
    '  cluster:',
    `    server: ${server}`,
    '    insecure-skip-tls-verify: true',
    'users:',
    `- name: ${user}`,
    '  user:',
    `    token: ${token}`,
    'contexts:',
    '- name: test',
    '  context:',
    '    cluster: test',
    `    user: ${user}`,
    '    namespace: default',
    'current-context: test',
    '',
  ].join('\n');
}

/** Starts etcd + kube-apiserver, applies the CRDs and the chart's RBAC for the operator user. */
export async function startKube(options: { rbac?: boolean } = {}): Promise<KubeEnv> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-kube-'));
  let etcd: Proc | undefined;
  let apiserver: Proc | undefined;
  let webhook: Awaited<ReturnType<typeof startTestWebhook>> | undefined;
  const stop = async () => {
    await stopProcess(apiserver);
    await stopProcess(etcd);
    await webhook?.close();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
    etcd = startProcess(tool('etcd'), [
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
      '--unsafe-no-fsync=true',
      // info: its start (the election, the listeners) is in the output a timeout prints.
      '--log-level=info',
    ]);
    await waitFor(
      'etcd',
      etcd,
      async () => {
        const res = await fetch(`http://127.0.0.1:${etcdPort}/health`, {
          signal: AbortSignal.timeout(5_000),
        });
        return okOr(res.status, await res.text());
      },
      30_000,
    );

    const adminToken = randomBytes(16).toString('hex');
    const operatorToken = randomBytes(16).toString('hex');
    await writeFile(
      path.join(dir, 'tokens.csv'),
      `${adminToken},admin,1,"system:masters"\n${operatorToken},${OPERATOR_USER},2\n`,
    );
    const { privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    await writeFile(path.join(dir, 'sa.key'), privateKey);
    const server = `https://127.0.0.1:${apiPort}`;
    apiserver = startProcess(tool('kube-apiserver'), [
      `--etcd-servers=http://127.0.0.1:${etcdPort}`,
      `--cert-dir=${path.join(dir, 'certs')}`,
      `--secure-port=${apiPort}`,
      '--bind-address=127.0.0.1',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      '--disable-admission-plugins=ServiceAccount',
      '--authorization-mode=RBAC',
      `--token-auth-file=${path.join(dir, 'tokens.csv')}`,
      `--service-account-issuer=${server}/`,
      `--service-account-key-file=${path.join(dir, 'sa.key')}`,
      `--service-account-signing-key-file=${path.join(dir, 'sa.key')}`,
      '--enable-priority-and-fairness=false',
      '--v=0',
    ]);
    await waitFor(
      'kube-apiserver',
      apiserver,
      async () => {
        const res = await insecureGet(`${server}/readyz`, adminToken);
        return okOr(res.status, res.body);
      },
      90_000,
    );

    const adminKubeconfig = path.join(dir, 'admin.kubeconfig');
    const operatorKubeconfig = path.join(dir, 'operator.kubeconfig');
    await writeFile(adminKubeconfig, kubeconfigYaml(server, adminToken, 'admin'));
    await writeFile(operatorKubeconfig, kubeconfigYaml(server, operatorToken, OPERATOR_USER));

    const kubectl = async (args: string[], opts: { input?: string; asOperator?: boolean } = {}) => {
      const kubeconfig = opts.asOperator ? operatorKubeconfig : adminKubeconfig;
      const child = execFile(tool('kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
        maxBuffer: 20 * 1024 * 1024,
      });
      const result = new Promise<string>((resolve, reject) => {
        let out = '';
        let err = '';
        child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
        child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
        child.on('close', (code) =>
          code === 0
            ? resolve(out)
            : reject(new Error(`kubectl ${args.join(' ')} exited ${code}: ${err}${out}`)),
        );
      });
      // kubectl exits without reading stdin for commands that take none (auth can-i): a write
      // to its closed pipe is EPIPE, which is not a failure of the command; its exit code is.
      child.stdin?.on('error', () => {});
      if (opts.input === undefined) child.stdin?.end();
      else child.stdin?.end(opts.input);
      return result;
    };
    const apply = (yamlText: string) =>
      kubectl(['apply', '--server-side', '--force-conflicts', '-f', '-'], { input: yamlText });

    webhook = await startTestWebhook();
    const env: KubeEnv = {
      webhookUrl: webhook.url,
      server,
      adminKubeconfig,
      operatorKubeconfig,
      adminToken,
      operatorToken,
      stop,
      kubectl,
      apply,
    };
    for (const file of CRD_FILES)
      await apply(crdWithWebhookUrl(await readFile(file, 'utf8'), webhook.url, webhook.caBundle));
    await kubectl([
      'wait',
      '--for=condition=Established',
      '--timeout=60s',
      'crd/proxygateways.proxyfleet.io',
      'crd/apikeys.proxyfleet.io',
    ]);
    await apply(`apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${RELEASE_NAMESPACE}\n`);
    if (options.rbac !== false) await applyChartRbac(env);
    return env;
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The values every test render needs (the chart refuses to render without its secrets). */
export const CHART_TEST_VALUES = [
  '--set',
  'database.url=postgresql://proxyfleet:secret@postgres.proxyfleet-system:5432/proxyfleet',
  '--set',
  `apiSecrets.adminToken=${'a'.repeat(32)}`,
  '--set',
  `apiSecrets.credentialsKey=${'0'.repeat(64)}`,
  '--set',
  'api.dashboardUrl=https://dashboard.example.test',
];

/** Values that turn the chart's PgBouncer on in front of a `postgres-rw` server (templates only). */
export const PGBOUNCER_TEMPLATE_VALUES = [
  '--set',
  'database.pooling=transaction',
  '--set',
  'database.sessionUrl=postgresql://proxyfleet:secret@proxyfleet-pgbouncer:6432/proxyfleet_session',
  '--set',
  'pgbouncer.enabled=true',
  '--set',
  'pgbouncer.server.host=postgres-rw',
  '--set',
  'pgbouncer.server.existingSecret=proxyfleet-db-login',
];

/** `helm template` of the chart with the test values plus `args`, as text. */
export async function helmTemplateText(args: string[] = []): Promise<string> {
  const { stdout } = await run(
    tool('helm'),
    ['template', 'proxyfleet', CHART_DIR, '--namespace', RELEASE_NAMESPACE, ...CHART_TEST_VALUES, ...args],
    { maxBuffer: 20 * 1024 * 1024 },
  );
  return stdout;
}

/** Renders the chart and returns its documents. */
export async function helmTemplate(args: string[] = []): Promise<Array<Record<string, unknown>>> {
  const stdout = await helmTemplateText(args);
  return parseAllDocuments(stdout)
    .map((d) => d.toJSON() as Record<string, unknown> | null)
    .filter((d): d is Record<string, unknown> => d != null);
}

/**
 * Applies the chart's controller ClusterRole and Role (exactly as rendered) and binds them to the
 * test's operator user instead of the chart's ServiceAccount: the controller tests then prove
 * the chart's permissions are enough.
 */
export async function applyChartRbac(env: KubeEnv): Promise<void> {
  const docs = await helmTemplate();
  const roles = docs.filter((d) => d.kind === 'ClusterRole' || d.kind === 'Role');
  const controllerRoles = roles.filter((d) => (d.metadata as { name: string }).name.includes('controller'));
  if (controllerRoles.length === 0) throw new Error('the chart renders no controller ClusterRole/Role');
  const out: string[] = [];
  for (const role of controllerRoles) {
    const meta = role.metadata as { name: string; namespace?: string };
    out.push(JSON.stringify(role));
    const binding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: role.kind === 'ClusterRole' ? 'ClusterRoleBinding' : 'RoleBinding',
      metadata: { name: `test-${meta.name}`, ...(meta.namespace ? { namespace: meta.namespace } : {}) },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: role.kind, name: meta.name },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: OPERATOR_USER }],
    };
    out.push(JSON.stringify(binding));
  }
  await env.apply(out.join('\n---\n'));
}

/** Polls `check` until it returns a value other than undefined/false, or fails with its last error. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${what} not reached in ${timeoutMs} ms${lastError ? `: ${lastError instanceof Error ? lastError.message : JSON.stringify(lastError)}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A Kubernetes API server for the tests of a describeKube block (no operator, no database). */
export function useKube(): { kube: KubeEnv } {
  const fixture = {} as { kube: KubeEnv };
  jestHooks().beforeAll(async () => {
    fixture.kube = await startKube();
  }, 120_000);
  jestHooks().afterAll(async () => {
    await fixture.kube?.stop();
  });
  return fixture;
}
