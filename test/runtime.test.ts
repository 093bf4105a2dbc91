// The project runs on Node 24 from the node@24 devDependency (docs/design.md decision 1); a silent
// fallback to the machine's Node 20 must fail here.
import { describe, expect, it } from '@jest/globals';

describe('runtime', () => {
  it('runs on Node 24', () => {
    expect(Number(process.versions.node.split('.')[0])).toBe(24);
  });

  it('loads the ESM-only @kubernetes/client-node 2.x under jest', async () => {
    const k8s = await import('@kubernetes/client-node');
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
    expect(typeof kc.makeApiClient(k8s.CoreV1Api).listNamespace).toBe('function');
  });
});
