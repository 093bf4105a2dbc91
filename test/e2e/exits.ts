// The e2e steps of exits that carry the node's own addresses (docs/gateway.md, "Topologies"): a
// ProxyGateway with `hostNetwork: true` and three `sourceAddress` exits on the addresses
// `npm run cluster` puts on an interface of their own on the node (198.18.77.11-13, /32 each, routed
// nowhere). An origin on the node answers each request with the address it came from; an
// address removed from the node is reported in the ProxyGateway's status and its exit skipped.
// Registered by chart.e2e.test.ts, which owns the release these steps run against.
import { execFile } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';
import { expect, test } from '@jest/globals';
import { accepts, eventually, readyPods, type Kubectl, type Origin } from './cluster.ts';

const run = promisify(execFile);

/** scripts/cluster.sh's EXIT_LINK and EXIT_ADDRESSES. */
const EXIT_LINK = 'pfexit0';
const DE_A = '198.18.77.11';
const DE_B = '198.18.77.12';
const FR = '198.18.77.13';
const NAME = 'exits';
/** The gateway binds the node's port: one no other test on this machine uses. */
const PORT = 20082;

export interface ExitContext {
  kubectl: Kubectl;
  /** The release's namespace: Pod Security `restricted`, which admits no hostNetwork pod. */
  releaseNamespace: string;
  /** The Secret of the release's database URL, copied into the gateway's own namespace. */
  databaseSecret: string;
  origin: Origin;
  /** `user:password` of a new account holding `gb` of datacenter bandwidth. */
  datacenterCustomer: (name: string, gb: number) => Promise<{ user: string; password: string }>;
  say: (line: string) => void;
}

interface ExitStatus {
  status?: {
    exitsReady?: string;
    failedExits?: number;
    exits?: Array<{ name: string; missing?: number; ok?: number; failing?: number }>;
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
  };
}

/** One GET through the gateway on the node's port: the status and the body (the origin's /ip: the exit's address). */
function viaGateway(credentials: string, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const target = new URL(url);
    const req = http.get(
      {
        host: '127.0.0.1',
        port: PORT,
        path: url,
        agent: false,
        timeout: 20_000,
        headers: {
          host: target.host,
          'proxy-authorization': `Basic ${Buffer.from(credentials).toString('base64')}`,
          connection: 'close',
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('latin1');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', (err) => resolve({ status: 0, body: err.message }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err) => resolve({ status: 0, body: err.message }));
  });
}

/** Runs `jobs` with at most `width` in flight. */
async function pool<T>(jobs: Array<() => Promise<T>>, width: number): Promise<T[]> {
  const out: T[] = new Array<T>(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]!();
      }
    }),
  );
  return out;
}

const address = (verb: 'add' | 'del', a: string) =>
  run('ip', ['addr', verb, `${a}/32`, 'dev', EXIT_LINK]).then(() => undefined);

/**
 * The hostNetwork gateway's namespace: Pod Security `privileged` (hostNetwork is refused by
 * `baseline` and `restricted`), so that the release's own stays `restricted` (docs/operator.md).
 */
export const exitsNamespace = (releaseNamespace: string) => `${releaseNamespace}-exits`;

/** The namespace, labelled `privileged`, with a copy of the release's database Secret (the gateway pods read it there). */
async function hostNetworkNamespace({
  kubectl,
  releaseNamespace,
  databaseSecret,
}: ExitContext): Promise<string> {
  const namespace = exitsNamespace(releaseNamespace);
  const secret = await kubectl.json<{ data: Record<string, string>; type: string }>([
    'get',
    'secret',
    databaseSecret,
    '-n',
    releaseNamespace,
  ]);
  await kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [
        {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name: namespace, labels: { 'pod-security.kubernetes.io/enforce': 'privileged' } },
        },
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: databaseSecret, namespace },
          type: secret.type,
          data: secret.data,
        },
      ],
    }),
  );
  return namespace;
}

export function exitSteps(ctx: () => ExitContext): void {
  let creds: { user: string; password: string };
  let namespace: string;
  const as = (suffix: string) => `${creds.user}:${creds.password}${suffix}`;
  const status = async () => ctx().kubectl.json<ExitStatus>(['get', 'pgw', NAME, '-n', namespace]);
  const missing = (s: ExitStatus) => s.status?.conditions?.find((c) => c.type === 'ExitAddressMissing');

  test('a hostNetwork ProxyGateway with three sourceAddress exits: the origin sees the chosen address for each country, sticky sessions keep theirs', async () => {
    const { kubectl, origin, say } = ctx();
    namespace = await hostNetworkNamespace(ctx());
    creds = await ctx().datacenterCustomer('exits', 1);
    await kubectl(
      ['apply', '-f', '-'],
      `apiVersion: proxyfleet.io/v1alpha1
kind: ProxyGateway
metadata: { name: ${NAME}, namespace: ${namespace} }
spec:
  plan: datacenter
  port: ${PORT}
  advertisedHost: dc.proxy.e2e.example
  hostNetwork: true
  healthPort: 20083
  replicas: { min: 1, max: 1 }
  resources: { requests: { cpu: 50m, memory: 96Mi } }
  exits:
    - { name: de-a, country: de, sourceAddress: ${DE_A} }
    - { name: de-b, country: de, sourceAddress: ${DE_B} }
    - { name: fr, country: fr, sourceAddress: ${FR} }
`,
    );
    await readyPods(kubectl, namespace, `proxyfleet.io/proxygateway=${NAME}`, 1);
    await eventually(`the gateway on the node's port ${PORT}`, () => accepts(PORT));
    const ready = await eventually('every exit reported present', async () => {
      const s = await status();
      return missing(s)?.status === 'False' && s.status?.exitsReady === '3/3' ? s : undefined;
    });
    expect(ready.status?.failedExits ?? 0).toBe(0);

    const ip = `${origin.url}/ip`;
    const jobs: Array<
      () => Promise<{ want: string[]; got: { status: number; body: string }; session?: string }>
    > = [];
    for (let i = 0; i < 100; i++)
      jobs.push(async () => ({ want: [DE_A, DE_B], got: await viaGateway(as('_country-de'), ip) }));
    for (let i = 0; i < 100; i++)
      jobs.push(async () => ({ want: [FR], got: await viaGateway(as('_country-fr'), ip) }));
    for (let s = 0; s < 10; s++)
      for (let i = 0; i < 10; i++)
        jobs.push(async () => ({
          want: [DE_A, DE_B],
          session: `e2e${s}`,
          got: await viaGateway(as(`_country-de_session-e2e${s}_lifetime-10m`), ip),
        }));
    const started = Date.now();
    const results = await pool(jobs, 8);
    const wrong = results.filter((r) => r.got.status !== 200 || !r.want.includes(r.got.body));
    const bySession = new Map<string, Set<string>>();
    for (const r of results)
      if (r.session) bySession.set(r.session, (bySession.get(r.session) ?? new Set()).add(r.got.body));
    const seen = (want: string) => results.filter((r) => !r.session && r.got.body === want).length;
    say(
      `exits: ${results.length} requests in ${Date.now() - started} ms, ${wrong.length} wrong addresses; ` +
        `rotating de: ${DE_A} ${seen(DE_A)}, ${DE_B} ${seen(DE_B)}; fr: ${FR} ${seen(FR)}; ` +
        `sessions: ${[...bySession.values()].map((s) => [...s].join('+')).join(' ')}`,
    );
    expect(wrong.map((r) => `${r.got.status} ${r.got.body}, wanted ${r.want.join('|')}`)).toEqual([]);
    // Rotating de spreads over both of its exits; each session keeps one address throughout.
    expect(seen(DE_A)).toBeGreaterThan(0);
    expect(seen(DE_B)).toBeGreaterThan(0);
    expect([...bySession.values()].map((s) => s.size)).toEqual(new Array(10).fill(1));
  }, 400_000);

  test('an exit address removed from the node: the status names it and its exit is skipped; put back, it serves again', async () => {
    const { kubectl, say } = ctx();
    const ip = `${ctx().origin.url}/ip`;
    // A session that lands on de-b before the address goes.
    let pinned = '';
    for (let s = 0; !pinned && s < 50; s++) {
      const r = await viaGateway(as(`_country-de_session-moved${s}_lifetime-10m`), ip);
      if (r.body === DE_B) pinned = `_country-de_session-moved${s}_lifetime-10m`;
    }
    expect(pinned).not.toBe('');
    const removedAt = Date.now();
    await address('del', DE_B);
    try {
      const s = await eventually(
        `the status to name ${DE_B} missing`,
        async () => {
          const s = await status();
          return missing(s)?.status === 'True' && missing(s)?.message?.includes(DE_B) ? s : undefined;
        },
        90_000,
        250,
      );
      const seenAfter = Date.now() - removedAt;
      expect(s.status?.exitsReady).toBe('2/3');
      const row = (await kubectl(['get', 'pgw', NAME, '-n', namespace, '--no-headers'])).trim().split(/\s+/);
      expect(row).toContain('2/3');
      // While it is missing, de is served from de-a only: rotating and the session pinned to de-b.
      const after = await pool(
        Array.from({ length: 40 }, (_, i) => () => viaGateway(as(i % 4 ? '_country-de' : pinned), ip)),
        8,
      );
      expect(
        after.filter((r) => r.status !== 200 || r.body !== DE_A).map((r) => `${r.status} ${r.body}`),
      ).toEqual([]);
      const putBackAt = Date.now();
      await address('add', DE_B);
      await eventually(
        'every exit present again',
        async () => {
          const s = await status();
          return missing(s)?.status === 'False' && s.status?.exitsReady === '3/3' ? true : undefined;
        },
        90_000,
        250,
      );
      const clearedAfter = Date.now() - putBackAt;
      const back = await pool(
        Array.from({ length: 40 }, () => () => viaGateway(as('_country-de'), ip)),
        8,
      );
      expect(back.every((r) => r.status === 200)).toBe(true);
      expect(back.some((r) => r.body === DE_B)).toBe(true);
      say(
        `exits: ${DE_B} removed, status named it after ${seenAfter} ms; put back, cleared after ${clearedAfter} ms`,
      );
    } finally {
      await address('add', DE_B).catch(() => undefined);
    }
    await kubectl(['delete', 'pgw', NAME, '-n', namespace, '--wait=true', '--timeout=120s']);
    await kubectl(['delete', 'namespace', namespace, '--wait=true', '--timeout=120s']);
  }, 400_000);
}
