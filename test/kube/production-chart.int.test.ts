// The chart's placement knobs and extras, the same for every component it deploys (api, worker,
// controller, relay, pgbouncer) through one helper: affinity, topologySpreadConstraints (a
// constraint without labelSelector counts the component's own pods), priorityClassName,
// podAnnotations, podLabels (never the chart's own labels), extraEnv; and its `helm test` pods, the
// API's /readyz and the gateways' 407 (docs/adr/0120). The API server accepts everything rendered with all of them set.
import { expect, test } from '@jest/globals';
import { describeKube } from './describe-kube.ts';
import {
  helmTemplate,
  helmTemplateText,
  PGBOUNCER_TEMPLATE_VALUES,
  RELEASE_NAMESPACE,
  useKube,
} from './env.ts';

type Env = { name: string; value?: string };
type PodSpec = Record<string, any> & {
  containers: Array<{ name: string; env?: Env[] } & Record<string, any>>;
};
type Doc = {
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: Record<string, any>;
};

const COMPONENTS = ['api', 'worker', 'controller', 'relay', 'pgbouncer'] as const;
const affinity = {
  podAntiAffinity: {
    preferredDuringSchedulingIgnoredDuringExecution: [
      {
        weight: 100,
        podAffinityTerm: {
          topologyKey: 'kubernetes.io/hostname',
          labelSelector: { matchLabels: { 'app.kubernetes.io/part-of': 'proxyfleet' } },
        },
      },
    ],
  },
};
const zoneSpread = {
  maxSkew: 1,
  topologyKey: 'topology.kubernetes.io/zone',
  whenUnsatisfiable: 'ScheduleAnyway',
};
const ownSpread = {
  ...zoneSpread,
  topologyKey: 'kubernetes.io/hostname',
  labelSelector: { matchLabels: { tier: 'x' } },
};

/** Every knob set on every component, as --set-json arguments. */
const placementArgs = (component: string) => {
  const values = {
    nodeSelector: { pool: 'system' },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'system', effect: 'NoSchedule' }],
    affinity,
    topologySpreadConstraints: [zoneSpread, ownSpread],
    priorityClassName: 'system-cluster-critical',
    podAnnotations: { 'example.com/owner': 'platform' },
    podLabels: { team: 'platform' },
    extraEnv: [{ name: 'EXTRA_ONE', value: component }],
  };
  return Object.entries(values).flatMap(([k, v]) => ['--set-json', `${component}.${k}=${JSON.stringify(v)}`]);
};
const GATEWAY_TESTS = [
  '--set-json',
  'tests.gateways=[{"name":"basic","port":12321},{"name":"dc","port":20080}]',
];
const ALL = [...PGBOUNCER_TEMPLATE_VALUES, ...COMPONENTS.flatMap(placementArgs), ...GATEWAY_TESTS];

const deployments = async (args: string[]) =>
  Object.fromEntries(
    ((await helmTemplate(args)) as Doc[])
      .filter((d) => d.kind === 'Deployment')
      .map((d) => [d.metadata.name.replace(/^proxyfleet-/, ''), d]),
  );

describeKube('Helm chart in production: placement, extras and helm test', () => {
  const fx = useKube();

  test.each(COMPONENTS)('%s: every placement knob and extra reaches its pod template', async (component) => {
    const d = (await deployments(ALL))[component]!;
    const pod = d.spec.template.spec as PodSpec;
    const selector = d.spec.selector.matchLabels as Record<string, string>;
    expect(pod.nodeSelector).toEqual({ pool: 'system' });
    expect(pod.tolerations).toEqual([
      { key: 'dedicated', operator: 'Equal', value: 'system', effect: 'NoSchedule' },
    ]);
    expect(pod.affinity).toEqual(affinity);
    // A constraint without labelSelector counts this component's pods; one with its own keeps it.
    expect(pod.topologySpreadConstraints).toEqual([
      { ...zoneSpread, labelSelector: { matchLabels: selector } },
      ownSpread,
    ]);
    expect(pod.priorityClassName).toBe('system-cluster-critical');
    const meta = d.spec.template.metadata as Doc['metadata'];
    expect(meta.labels).toEqual(expect.objectContaining({ ...selector, team: 'platform' }));
    expect(meta.annotations).toEqual(expect.objectContaining({ 'example.com/owner': 'platform' }));
    // After the chart's own variables: the main container only (not PgBouncer's init container).
    expect(pod.containers[0]!.env!.at(-1)).toEqual({ name: 'EXTRA_ONE', value: component });
    expect(pod.initContainers?.[0]?.env?.map((e: Env) => e.name) ?? []).not.toContain('EXTRA_ONE');
  });

  test('unset knobs render nothing; PgBouncer keeps its config checksum beside podAnnotations', async () => {
    const plain = await deployments(PGBOUNCER_TEMPLATE_VALUES);
    for (const component of COMPONENTS) {
      const pod = plain[component]!.spec.template.spec as PodSpec;
      for (const key of [
        'nodeSelector',
        'tolerations',
        'affinity',
        'topologySpreadConstraints',
        'priorityClassName',
      ])
        expect(pod).not.toHaveProperty(key);
    }
    expect(plain.pgbouncer!.spec.template.spec.containers[0]).not.toHaveProperty('env');
    expect(plain.api!.spec.template.metadata).not.toHaveProperty('annotations');
    const annotations = (await deployments(ALL)).pgbouncer!.spec.template.metadata.annotations;
    expect(Object.keys(annotations).sort()).toEqual(['checksum/config', 'example.com/owner']);
  });

  test("podLabels may not set the chart's labels, podAnnotations not its checksum; the schema checks the shapes", async () => {
    await expect(
      helmTemplateText(['--set', 'worker.podLabels.app\\.kubernetes\\.io/name=other']),
    ).rejects.toThrow(/worker.podLabels may not set app.kubernetes.io\/name/);
    await expect(
      helmTemplateText(['--set', 'api.podLabels.app\\.kubernetes\\.io/instance=other']),
    ).rejects.toThrow(/api.podLabels may not set app.kubernetes.io\/instance/);
    await expect(
      helmTemplateText([...PGBOUNCER_TEMPLATE_VALUES, '--set', 'pgbouncer.podAnnotations.checksum/config=x']),
    ).rejects.toThrow(/pgbouncer.podAnnotations may not set checksum\/config/);
    await expect(
      helmTemplateText(['--set-json', 'relay.topologySpreadConstraints=[{"maxSkew":1}]']),
    ).rejects.toThrow(/topologyKey/);
    await expect(helmTemplateText(['--set-json', 'controller.extraEnv=[{"value":"x"}]'])).rejects.toThrow(
      /name/,
    );
    await expect(helmTemplateText(['--set-json', 'api.podLabels={"n":1}'])).rejects.toThrow(/podLabels/);
  });

  test('helm test: a hook Pod of the chart image, restricted, asks the API Service for /readyz', async () => {
    const hook = (args: string[]) =>
      helmTemplate(args).then((docs) =>
        (docs as Doc[]).find((d) => d.kind === 'Pod' && d.metadata.name === 'proxyfleet-test-api-readyz'),
      );
    const pod = (await hook(['--set', 'api.service.port=8443']))!;
    expect(pod.metadata.annotations).toEqual({
      'helm.sh/hook': 'test',
      'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded',
    });
    expect(pod.metadata.labels).toEqual(
      expect.objectContaining({
        'app.kubernetes.io/name': 'proxyfleet-test',
        'app.kubernetes.io/component': 'test',
      }),
    );
    expect(pod.spec).toEqual(
      expect.objectContaining({
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        securityContext: expect.objectContaining({
          runAsNonRoot: true,
          seccompProfile: { type: 'RuntimeDefault' },
        }),
      }),
    );
    const [container] = pod.spec.containers as PodSpec['containers'];
    expect(container!.image).toBe('ghcr.io/proxyfleet/proxyfleet:0.1.0');
    expect(container!.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container!.env).toEqual([
      { name: 'READYZ_URL', value: 'http://proxyfleet-api.proxyfleet-system.svc:8443/readyz' },
    ]);
    // A cluster without DNS (relay.address=serviceEnv): the Service's variables, which the kubelet expands.
    const noDns = (await hook(['--set', 'relay.address=serviceEnv']))!;
    expect((noDns.spec.containers as PodSpec['containers'])[0]!.env).toEqual([
      { name: 'READYZ_URL', value: 'http://$(PROXYFLEET_API_SERVICE_HOST):8080/readyz' },
    ]);
  });

  test("helm test: with tests.gateways or the examples, a hook Pod expects each gateway Service's 407", async () => {
    const hook = (args: string[]) =>
      helmTemplate(args).then((docs) =>
        (docs as Doc[]).find((d) => d.kind === 'Pod' && d.metadata.name === 'proxyfleet-test-gateways'),
      );
    const env = (pod: Doc | undefined) =>
      (pod?.spec.containers as PodSpec['containers'] | undefined)?.[0]?.env;
    expect(await hook([])).toBeUndefined();
    const pod = (await hook(GATEWAY_TESTS))!;
    expect(pod.metadata.annotations).toEqual({
      'helm.sh/hook': 'test',
      'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded',
    });
    expect(pod.spec.securityContext).toEqual(expect.objectContaining({ runAsNonRoot: true }));
    expect(env(pod)).toEqual([
      {
        name: 'GATEWAYS',
        value: 'basic=basic-gateway.proxyfleet-system.svc:12321,dc=dc-gateway.proxyfleet-system.svc:20080',
      },
    ]);
    expect(env(await hook([...GATEWAY_TESTS, '--set', 'relay.address=serviceEnv']))).toEqual([
      {
        name: 'GATEWAYS',
        value: 'basic=$(BASIC_GATEWAY_SERVICE_HOST):12321,dc=$(DC_GATEWAY_SERVICE_HOST):20080',
      },
    ]);
    // The examples are added, unless their Services require the PROXY protocol (a test pod cannot send it).
    expect(env(await hook(['--set', 'examples.enabled=true']))).toEqual([
      {
        name: 'GATEWAYS',
        value:
          'advanced=advanced-gateway.proxyfleet-system.svc:61236,basic=basic-gateway.proxyfleet-system.svc:12321,light=light-gateway.proxyfleet-system.svc:10080',
      },
    ]);
    expect(
      await hook(['--set', 'examples.enabled=true', '--set', 'examples.proxyProtocol.mode=required']),
    ).toBeUndefined();
    await expect(
      helmTemplateText(['--set-json', 'tests.gateways=[{"name":"Basic","port":1}]']),
    ).rejects.toThrow(/name/);
  });

  test('the API server accepts everything rendered with every knob set, and the helm test pod', async () => {
    const text = await helmTemplateText(ALL);
    const out = await fx.kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '--force-conflicts', '-n', RELEASE_NAMESPACE, '-f', '-'],
      { input: text },
    );
    for (const component of COMPONENTS)
      expect(out).toMatch(new RegExp(`deployment.apps/proxyfleet-${component} serverside-applied`));
    expect(out).toMatch(/pod\/proxyfleet-test-api-readyz serverside-applied/);
    expect(out).toMatch(/pod\/proxyfleet-test-gateways serverside-applied/);
  });
});
