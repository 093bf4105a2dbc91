// Writing a custom resource's status: server-side apply of just {status} on the /status
// subresource, so the spec and other writers' fields are never touched.
import type { KubeClient, KubeObject, Resource } from './kube.ts';

/** metav1.Time: RFC 3339 in UTC, whole seconds. */
export const rfc3339 = (d: Date) => d.toISOString().replace(/\.\d+Z$/, 'Z');

export function applyStatus(
  client: KubeClient,
  r: Resource,
  object: KubeObject,
  status: unknown,
  fieldManager: string,
): Promise<KubeObject> {
  const { name, namespace } = object.metadata;
  return client.apply(
    r,
    { apiVersion: object.apiVersion, kind: object.kind, metadata: { name, namespace }, status } as KubeObject,
    { fieldManager, subresource: 'status', force: true },
  );
}
