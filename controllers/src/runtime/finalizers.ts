// Finalizers: added before the first external side effect, removed after cleanup. Merge patches
// carry the resourceVersion read, so a concurrent writer makes them fail with 409 (retried by the
// queue) instead of silently dropping someone else's finalizer.
import type { KubeClient, KubeObject, Resource } from './kube.ts';

export const hasFinalizer = (o: KubeObject, name: string) => (o.metadata.finalizers ?? []).includes(name);

export async function addFinalizer<T extends KubeObject>(
  client: KubeClient,
  r: Resource,
  o: T,
  name: string,
): Promise<T> {
  if (hasFinalizer(o, name)) return o;
  return client.mergePatch<T>(r, o.metadata.namespace, o.metadata.name, {
    metadata: {
      finalizers: [...(o.metadata.finalizers ?? []), name],
      resourceVersion: o.metadata.resourceVersion,
    },
  });
}

export async function removeFinalizer<T extends KubeObject>(
  client: KubeClient,
  r: Resource,
  o: T,
  name: string,
): Promise<void> {
  if (!hasFinalizer(o, name)) return;
  await client.mergePatch<T>(r, o.metadata.namespace, o.metadata.name, {
    metadata: {
      finalizers: (o.metadata.finalizers ?? []).filter((f) => f !== name),
      resourceVersion: o.metadata.resourceVersion,
    },
  });
}
