// The chart's PodDisruptionBudget and HorizontalPodAutoscaler for the API: on by default (budget)
// and off by default (autoscaler), the Deployment leaving spec.replicas to the HPA while it is on,
// no budget over a single pod, bad bounds refused at `helm template`, and the API server
// accepting what is rendered (server-side dry run).
import { expect, test } from '@jest/globals';
import { describeKube } from './describe-kube.ts';
import { helmTemplate, helmTemplateText, RELEASE_NAMESPACE, useKube } from './env.ts';

type Doc = { kind: string; metadata: { name: string }; spec?: Record<string, any> };

const apiDocs = async (args: string[] = []) =>
  ((await helmTemplate(args)) as Doc[]).filter((d) => d.metadata?.name === 'proxyfleet-api');
const ofKind = (docs: Doc[], kind: string) => docs.find((d) => d.kind === kind);

describeKube('Helm chart: the API under disruption and load', () => {
  const fx = useKube();

  test('defaults: a budget of one unavailable pod over the two replicas, no autoscaler', async () => {
    const docs = await apiDocs();
    const pdb = ofKind(docs, 'PodDisruptionBudget')!;
    expect(pdb.spec).toEqual({
      maxUnavailable: 1,
      selector: { matchLabels: ofKind(docs, 'Deployment')!.spec!.selector.matchLabels },
    });
    expect(ofKind(docs, 'HorizontalPodAutoscaler')).toBeUndefined();
    expect(ofKind(docs, 'Deployment')!.spec!.replicas).toBe(2);
  });

  test('autoscaling on: an HPA on CPU owns the replica count, the Deployment leaves it out', async () => {
    const docs = await apiDocs([
      '--set',
      'api.autoscaling.enabled=true',
      '--set',
      'api.autoscaling.minReplicas=3',
      '--set',
      'api.autoscaling.maxReplicas=9',
      '--set',
      'api.autoscaling.targetCPUUtilizationPercent=65',
    ]);
    const hpa = ofKind(docs, 'HorizontalPodAutoscaler')!;
    expect(hpa.spec).toEqual(
      expect.objectContaining({
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'proxyfleet-api' },
        minReplicas: 3,
        maxReplicas: 9,
        metrics: [
          {
            type: 'Resource',
            resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 65 } },
          },
        ],
      }),
    );
    expect(ofKind(docs, 'Deployment')!.spec).not.toHaveProperty('replicas');
    expect(ofKind(docs, 'PodDisruptionBudget')).toBeDefined();
  });

  test('no budget over a single pod (it would block every drain), and either can be turned off', async () => {
    expect(ofKind(await apiDocs(['--set', 'api.replicas=1']), 'PodDisruptionBudget')).toBeUndefined();
    const oneMin = await apiDocs([
      '--set',
      'api.autoscaling.enabled=true',
      '--set',
      'api.autoscaling.minReplicas=1',
    ]);
    expect(ofKind(oneMin, 'PodDisruptionBudget')).toBeUndefined();
    expect(ofKind(oneMin, 'HorizontalPodAutoscaler')).toBeDefined();
    const off = await apiDocs(['--set', 'api.podDisruptionBudget.enabled=false']);
    expect(ofKind(off, 'PodDisruptionBudget')).toBeUndefined();
  });

  test('bad bounds are refused with the value named', async () => {
    await expect(
      helmTemplateText(['--set', 'api.autoscaling.enabled=true', '--set', 'api.autoscaling.minReplicas=7']),
    ).rejects.toThrow(/api.autoscaling.minReplicas must not exceed api.autoscaling.maxReplicas/);
    await expect(
      helmTemplateText(['--set', 'api.autoscaling.targetCPUUtilizationPercent=0']),
    ).rejects.toThrow(/targetCPUUtilizationPercent/);
    await expect(helmTemplateText(['--set', 'api.podDisruptionBudget.maxUnavailable=0'])).rejects.toThrow(
      /maxUnavailable/,
    );
  });

  test('the API server accepts the rendered budget and autoscaler', async () => {
    const text = await helmTemplateText([
      '--set',
      'api.autoscaling.enabled=true',
      '--show-only',
      'templates/api-scaling.yaml',
    ]);
    const out = await fx.kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '-n', RELEASE_NAMESPACE, '-f', '-'],
      { input: text },
    );
    expect(out).toMatch(/poddisruptionbudget.policy\/proxyfleet-api serverside-applied/);
    expect(out).toMatch(/horizontalpodautoscaler.autoscaling\/proxyfleet-api serverside-applied/);
  });
});
