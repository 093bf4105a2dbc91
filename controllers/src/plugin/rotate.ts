// `kubectl proxyfleet rotate-key APIKEY`: raises the ApiKey's spec.rotation by one (a merge patch
// carrying the resourceVersion read, so two rotations at once cannot both count as one) and waits
// until the operator has written the new key to the Secret and says so in status.
import { API_KEY } from '../crds/resources.ts';
import type { ApiKey } from '../crds/types.generated.ts';
import { findCondition } from '../runtime/conditions.ts';
import { isConflict } from '../runtime/kube.ts';
import { isPaused, RECONCILE_ANNOTATION } from '../runtime/pause.ts';
import { explain, PluginError, type PluginContext } from './context.ts';

export interface RotateOptions {
  wait: boolean;
  timeoutMs: number;
  pollMs?: number;
}

export async function rotateKey(ctx: PluginContext, name: string, o: RotateOptions): Promise<void> {
  const where = `apikey ${name} in namespace ${ctx.namespace}`;
  const ak = await ctx.client.get<ApiKey>(API_KEY, ctx.namespace, name).catch((err: unknown) => {
    throw explain(err, ctx, `reading ${where}`, API_KEY);
  });
  if (!ak) throw new PluginError(`${where} not found (kubectl get apikeys -n ${ctx.namespace} lists them)`);
  if (ak.spec.revoked)
    throw new PluginError(`${where} is revoked: a revoked key is never rotated; create a new ApiKey`);
  if (isPaused(ak))
    throw new PluginError(
      `${where} is paused: the operator would not rotate it; resume it first (kubectl annotate apikey ${name} -n ${ctx.namespace} ${RECONCILE_ANNOTATION}-)`,
    );
  const rotation = ak.spec.rotation + 1;
  try {
    await ctx.client.mergePatch(API_KEY, ctx.namespace, name, {
      metadata: { resourceVersion: ak.metadata.resourceVersion },
      spec: { rotation },
    });
  } catch (err) {
    if (isConflict(err))
      throw new PluginError(
        `${where} changed while rotating it (someone else wrote it): run the command again`,
      );
    throw explain(err, ctx, `rotating ${where}`, API_KEY);
  }
  if (!o.wait) {
    ctx.out(`apikey/${name} rotation ${rotation} requested\n`);
    return;
  }
  const deadline = Date.now() + o.timeoutMs;
  for (;;) {
    const now = await ctx.client.get<ApiKey>(API_KEY, ctx.namespace, name).catch((err: unknown) => {
      throw explain(err, ctx, `reading ${where}`, API_KEY);
    });
    if (!now) throw new PluginError(`${where} was deleted while rotating it`);
    const ready = findCondition(now.status?.conditions, 'Ready');
    if ((now.status?.observedRotation ?? 0) >= rotation && ready?.status === 'True') {
      ctx.out(
        `apikey/${name} rotated: rotation ${rotation}, key ${now.status?.prefix ?? ''}… in Secret ${now.spec.secretRef.name}` +
          `${now.status?.synced ? ` (caches: ${now.status.synced})` : ''}\n`,
      );
      return;
    }
    // A refusal the operator reported after seeing this rotation (key limit, foreign Secret...).
    if (ready?.status === 'False' && (ready.observedGeneration ?? 0) >= (now.metadata.generation ?? 0))
      throw new PluginError(`${where} was not rotated: ${ready.reason}: ${ready.message}`);
    if (Date.now() > deadline)
      throw new PluginError(
        `${where}: rotation ${rotation} requested but not done after ${Math.round(o.timeoutMs / 1000)} s ` +
          `(status.observedRotation ${now.status?.observedRotation ?? 0}): is the proxyfleet operator running?`,
      );
    await new Promise((r) => setTimeout(r, o.pollMs ?? 250));
  }
}
