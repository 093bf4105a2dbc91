// The release's namespace enforces Pod Security `restricted` (docs/operator.md, "The chart in
// production"): every pod of the chart, of the operator's gateways and of `helm test` is admitted
// there, and a hostNetwork pod is refused (the exits' gateway runs in a namespace of its own,
// exits.ts). Registered by chart.e2e.test.ts, which owns the release.
import { expect, test } from '@jest/globals';
import { VERSION, type Kubectl } from './cluster.ts';

/** Creates `name` with Pod Security `restricted` enforced (and warned and audited). */
export async function restrictedNamespace(kubectl: Kubectl, name: string): Promise<void> {
  const labels = Object.fromEntries(
    ['enforce', 'warn', 'audit'].map((mode) => [`pod-security.kubernetes.io/${mode}`, 'restricted']),
  );
  await kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } }),
  );
}

export interface PodSecurityContext {
  kubectl: Kubectl;
  namespace: string;
  release: string;
  /** A ProxyGateway of the release namespace with pods Ready, named in the release's tests.gateways. */
  gateway: string;
  say: (line: string) => void;
}

export function podSecuritySteps(ctx: () => PodSecurityContext): void {
  test('Pod Security restricted: the namespace refuses a hostNetwork pod; helm test passes in it', async () => {
    const { kubectl, namespace, release, gateway, say } = ctx();
    const refused = await kubectl([
      'run',
      'hostnet',
      '-n',
      namespace,
      `--image=localhost/proxyfleet:${VERSION}`,
      '--dry-run=server',
      '--overrides={"spec":{"hostNetwork":true}}',
    ]).then(
      () => 'admitted',
      (err: Error) => err.message,
    );
    expect(refused).toMatch(/violates PodSecurity "restricted:latest".*host namespaces/s);
    const t0 = Date.now();
    const out = await kubectl.helm(['test', release, '-n', namespace, '--logs', '--timeout', '3m']);
    say(`helm test in ${((Date.now() - t0) / 1000).toFixed(1)} s:\n${out.trim()}`);
    expect(out).toMatch(/\/readyz: 200/);
    expect(out).toMatch(new RegExp(`${gateway} \\(.*:\\d+\\): 407`));
  }, 300_000);
}
