// The release's last steps: helm upgrade to a changed value, the custom resources deleted, helm
// uninstall leaving nothing behind in the namespace or the cluster, and a second release installed
// beside the CRDs the first kept. Registered by chart.e2e.test.ts, which owns the release.
import path from 'node:path';
import { expect, test } from '@jest/globals';
import { REPO_ROOT } from '../process.ts';
import { eventually, readyPods, type Kubectl } from './cluster.ts';

export interface UninstallContext {
  kubectl: Kubectl;
  namespace: string;
  /** A namespace for the second release (created here). */
  again: string;
  release: string;
  /** helm install of the release into a namespace, as the first install did. */
  install: (namespace: string) => Promise<string>;
}

export function uninstallSteps(ctx: () => UninstallContext): void {
  test('helm upgrade to a changed value, then helm uninstall, leave no orphan object or pod; a new release installs beside the kept CRDs', async () => {
    const { kubectl, namespace, again, release, install } = ctx();
    await kubectl.helm([
      'upgrade',
      release,
      path.join(REPO_ROOT, 'charts/proxyfleet'),
      '-n',
      namespace,
      '--reuse-values',
      '--set',
      'api.replicas=2',
      '--wait',
      '--timeout',
      '5m',
    ]);
    await readyPods(kubectl, namespace, 'app.kubernetes.io/name=proxyfleet-api', 2);
    await readyPods(kubectl, namespace, 'app.kubernetes.io/name=proxyfleet-worker', 1);
    await readyPods(kubectl, namespace, 'app.kubernetes.io/name=proxyfleet-controller', 1);
    // The custom resources first (the operator removes what they made), then the release.
    await kubectl(['delete', 'pgw,ak', '--all', '-n', namespace, '--wait=true', '--timeout=120s']);
    await kubectl.helm(['uninstall', release, '-n', namespace, '--wait', '--timeout', '3m']);
    const left = await eventually(
      'the namespace to be empty',
      async () => {
        const names = (
          await kubectl([
            'get',
            'all,configmaps,secrets,serviceaccounts,roles,rolebindings,poddisruptionbudgets,horizontalpodautoscalers,leases,networkpolicies,endpointslices',
            '-n',
            namespace,
            '-o',
            'name',
          ])
        )
          .trim()
          .split('\n')
          .filter((x) => x && x !== 'configmap/kube-root-ca.crt' && x !== 'serviceaccount/default');
        return names.length === 0 ? names : undefined;
      },
      180_000,
    ).catch(async (err: Error) => {
      throw new Error(
        `${err.message}\n${await kubectl(['get', 'all,leases,secrets,configmaps', '-n', namespace])}`,
      );
    });
    expect(left).toEqual([]);
    const clusterWide = await kubectl([
      'get',
      'clusterroles,clusterrolebindings',
      '-l',
      `app.kubernetes.io/instance=${release}`,
      '-o',
      'name',
    ]);
    expect(clusterWide.trim()).toBe('');
    // The CRDs stay (helm.sh/resource-policy: keep), still marked as this release's: a new release
    // in another namespace installs beside them instead of failing on their ownership.
    const crds = await kubectl([
      'get',
      'crd',
      'proxygateways.proxyfleet.io',
      'apikeys.proxyfleet.io',
      '-o',
      'name',
    ]);
    expect(crds.trim().split('\n')).toHaveLength(2);
    await kubectl(['create', 'namespace', again]);
    await install(again);
    await kubectl.helm(['uninstall', release, '-n', again, '--wait', '--timeout', '3m']);
  }, 600_000);
}
