// Kubernetes Events (core/v1) on notable transitions, so `kubectl describe` tells the story.
// Recording never fails a reconcile: an Event that cannot be written is logged and dropped.
import { randomBytes } from 'node:crypto';
import type { Logger } from '#common/logger.ts';
import type { KubeClient, KubeObject } from './kube.ts';
import { RESOURCES } from './resources.ts';

export type EventType = 'Normal' | 'Warning';

export interface EventRecorder {
  record(object: KubeObject, type: EventType, reason: string, message: string): Promise<void>;
}

export function createEventRecorder(client: KubeClient, component: string, logger: Logger): EventRecorder {
  return {
    async record(object, type, reason, message) {
      const now = new Date().toISOString();
      const namespace = object.metadata.namespace ?? 'default';
      try {
        await client.create(RESOURCES.event, {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name: `${object.metadata.name}.${randomBytes(8).toString('hex')}`, namespace },
          involvedObject: {
            apiVersion: object.apiVersion,
            kind: object.kind,
            name: object.metadata.name,
            namespace,
            uid: object.metadata.uid,
            resourceVersion: object.metadata.resourceVersion,
          },
          type,
          reason,
          message: message.slice(0, 1024),
          source: { component },
          reportingComponent: component,
          reportingInstance: component,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        } as KubeObject);
      } catch (err) {
        logger.warn({ err: (err as Error).message, reason }, 'could not record event');
      }
    },
  };
}
