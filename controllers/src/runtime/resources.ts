// The built-in kinds the runtime and the reconcilers touch (REST paths without discovery).
import type { Resource } from './kube.ts';

const core = (kind: string, plural: string, namespaced = true): Resource => ({
  group: '',
  version: 'v1',
  plural,
  kind,
  namespaced,
});

export const RESOURCES = {
  configMap: core('ConfigMap', 'configmaps'),
  secret: core('Secret', 'secrets'),
  service: core('Service', 'services'),
  event: core('Event', 'events'),
  namespace: core('Namespace', 'namespaces', false),
  node: core('Node', 'nodes', false),
  resourceQuota: core('ResourceQuota', 'resourcequotas'),
  deployment: { group: 'apps', version: 'v1', plural: 'deployments', kind: 'Deployment', namespaced: true },
  hpa: {
    group: 'autoscaling',
    version: 'v2',
    plural: 'horizontalpodautoscalers',
    kind: 'HorizontalPodAutoscaler',
    namespaced: true,
  },
  pdb: {
    group: 'policy',
    version: 'v1',
    plural: 'poddisruptionbudgets',
    kind: 'PodDisruptionBudget',
    namespaced: true,
  },
  networkPolicy: {
    group: 'networking.k8s.io',
    version: 'v1',
    plural: 'networkpolicies',
    kind: 'NetworkPolicy',
    namespaced: true,
  },
  lease: { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease', namespaced: true },
} as const satisfies Record<string, Resource>;
