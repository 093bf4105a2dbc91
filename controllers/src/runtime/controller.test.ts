import { describe, expect, it } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import { createRegistry } from '#common/metrics.ts';
import { Controller, type ReconcileResult, type ReconcileTrigger } from './controller.ts';
import type { Informer, InformerHandler } from './informer.ts';
import type { KubeObject } from './kube.ts';
import { ControllerMetrics } from './metrics.ts';

/** The part of an informer a controller uses, with a way to deliver an event. */
function fakeInformer() {
  const handlers: InformerHandler<KubeObject>[] = [];
  const informer = {
    resource: { group: 'proxyfleet.io', plural: 'things' },
    on: (h: InformerHandler<KubeObject>) => handlers.push(h),
    start: () => Promise.resolve(),
    stop: () => undefined,
    list: () => [],
    silenceSeconds: () => 0,
  } as unknown as Informer<KubeObject>;
  const event = (name: string) =>
    handlers.forEach((h) =>
      h('update', { apiVersion: 'v1', kind: 'Thing', metadata: { name, namespace: 'ns' } }),
    );
  return { informer, event };
}

/** A controller whose reconciler answers from `answers` in turn and records each trigger. */
async function controller(answers: Array<ReconcileResult | Error>) {
  const { informer, event } = fakeInformer();
  const calls: ReconcileTrigger[] = [];
  let next: () => void = () => undefined;
  const c = new Controller({
    name: 'things',
    primary: informer,
    logger: createLogger('test', 'silent'),
    metrics: new ControllerMetrics(createRegistry('controller', false)),
    queue: { baseDelayMs: 1 },
    reconcile: (_key, trigger) => {
      calls.push(trigger);
      next();
      const answer = answers.shift() ?? {};
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
    },
  });
  await c.start();
  /** Resolves once the reconciler has been called `n` times in all. */
  const called = (n: number) =>
    new Promise<void>((resolve) => {
      next = () => {
        if (calls.length >= n) resolve();
      };
      if (calls.length >= n) resolve();
    });
  return { c, calls, event, called };
}

describe('Controller: why a key is reconciled', () => {
  it('an event is a change; a key back only through its requeueAfterMs is a requeue', async () => {
    const { c, calls, event, called } = await controller([{ requeueAfterMs: 5 }, { requeueAfterMs: 5 }, {}]);
    event('a');
    await called(3);
    expect(calls).toEqual([{ requeued: false }, { requeued: true }, { requeued: true }]);
    await c.stop();
  });

  it('an event while it is reconciled makes the next round a change, not a requeue', async () => {
    const { c, calls, event, called } = await controller([{ requeueAfterMs: 60_000 }, {}]);
    event('a');
    await called(1);
    event('a');
    await called(2);
    expect(calls).toEqual([{ requeued: false }, { requeued: false }]);
    await c.stop();
  });

  it('the retry of a failed reconcile is a change, even of a requeued one', async () => {
    const { c, calls, event, called } = await controller([{ requeueAfterMs: 5 }, new Error('boom'), {}]);
    event('a');
    await called(3);
    expect(calls).toEqual([{ requeued: false }, { requeued: true }, { requeued: false }]);
    await c.stop();
  });
});
