// One controller: a primary informer, informers on the objects it owns (mapped back to their
// owner's key), a de-duplicating queue and workers calling reconcile(key). A failed reconcile is
// retried with per-key exponential backoff; a periodic resync re-queues every primary object so
// drift made behind our back is repaired even without an event. The reconciler is told when a
// key comes back only because it asked to (requeueAfterMs) with no event since: it may then do
// less (the ProxyGateway's periodic exits refresh reads one query and applies nothing).
import type { Logger } from '#common/logger.ts';
import { objectKey, type Informer } from './informer.ts';
import type { KubeObject } from './kube.ts';
import type { ControllerMetrics } from './metrics.ts';
import { WorkQueue, type QueueOptions } from './queue.ts';

export interface ReconcileResult {
  /** Reconcile again after this long (polling something outside Kubernetes). */
  requeueAfterMs?: number;
}

/** Why a key is reconciled. */
export interface ReconcileTrigger {
  /**
   * True when only the reconciler's own requeueAfterMs brought the key back: no informer event,
   * resync or failed attempt since its last reconcile.
   */
  requeued: boolean;
}

export interface ControllerOptions<T extends KubeObject> {
  name: string;
  primary: Informer<T>;
  owned?: Array<{ informer: Informer<KubeObject>; ownerKey: (o: KubeObject) => string | undefined }>;
  reconcile: (key: string, trigger: ReconcileTrigger) => Promise<ReconcileResult | void>;
  logger: Logger;
  metrics: ControllerMetrics;
  resyncMs?: number;
  workers?: number;
  queue?: QueueOptions;
}

const DEFAULT_RESYNC_MS = 5 * 60_000;

/** Maps an owned object to its controller owner's key (same namespace), when the owner is of `kind`. */
export function controllerOwnerKey(kind: string): (o: KubeObject) => string | undefined {
  return (o) => {
    const ref = o.metadata.ownerReferences?.find((r) => r.controller && r.kind === kind);
    if (!ref) return undefined;
    return o.metadata.namespace ? `${o.metadata.namespace}/${ref.name}` : ref.name;
  };
}

export class Controller<T extends KubeObject> {
  readonly queue: WorkQueue;
  private readonly opts: ControllerOptions<T>;
  private readonly logger: Logger;
  private resyncTimer: NodeJS.Timeout | undefined;
  private workers: Promise<void>[] = [];
  private running = false;
  /** Keys queued by an event, the resync or a failure since their last reconcile (not just requeued). */
  private readonly changed = new Set<string>();

  constructor(opts: ControllerOptions<T>) {
    this.opts = opts;
    this.logger = opts.logger.child({ controller: opts.name });
    this.queue = new WorkQueue({ ...opts.queue, hooks: opts.metrics.queueHooks(opts.name) });
    opts.primary.on((_event, o) => this.enqueue(objectKey(o)));
    for (const { informer, ownerKey } of opts.owned ?? []) {
      informer.on((_event, o) => {
        const key = ownerKey(o);
        if (key) this.enqueue(key);
      });
    }
  }

  private enqueue(key: string): void {
    this.changed.add(key);
    this.queue.add(key);
  }

  get informers(): Informer<KubeObject>[] {
    return [
      this.opts.primary as unknown as Informer<KubeObject>,
      ...(this.opts.owned ?? []).map((o) => o.informer),
    ];
  }

  async start(): Promise<void> {
    this.running = true;
    const { metrics } = this.opts;
    metrics.sources.queues.set(this.opts.name, () => this.queue.length);
    for (const inf of this.informers) {
      metrics.sources.informers.set(`${inf.resource.plural}.${inf.resource.group || 'core'}`, () =>
        inf.silenceSeconds(),
      );
    }
    // Owned objects first, so the first reconcile of each primary sees what already exists.
    await Promise.all(this.informers.slice(1).map((i) => i.start()));
    await this.opts.primary.start();
    const resyncMs = this.opts.resyncMs ?? DEFAULT_RESYNC_MS;
    this.resyncTimer = setInterval(() => {
      for (const o of this.opts.primary.list()) this.enqueue(objectKey(o));
    }, resyncMs);
    this.resyncTimer.unref();
    for (let i = 0; i < (this.opts.workers ?? 1); i++) this.workers.push(this.work());
    this.logger.info('controller started');
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.resyncTimer);
    this.queue.shutdown();
    for (const inf of this.informers) inf.stop();
    await Promise.all(this.workers);
    this.workers = [];
    this.opts.metrics.sources.queues.delete(this.opts.name);
    this.logger.info('controller stopped');
  }

  private async work(): Promise<void> {
    const { metrics, name } = this.opts;
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      const end = metrics.reconcileDuration.startTimer({ controller: name });
      const endStandard = metrics.reconcileTime.startTimer({ controller: name });
      // Taken before reconciling: an event while it runs marks the key again for the next round.
      const requeued = !this.changed.delete(key);
      try {
        const result = await this.opts.reconcile(key, { requeued });
        this.queue.forget(key);
        if (result?.requeueAfterMs !== undefined && this.running)
          this.queue.addAfter(key, result.requeueAfterMs);
        const again = result?.requeueAfterMs !== undefined;
        end({ result: again ? 'requeue' : 'success' });
        endStandard();
        metrics.reconcileTotal.inc({ controller: name, result: again ? 'requeue_after' : 'success' });
      } catch (err) {
        end({ result: 'error' });
        endStandard();
        metrics.reconcileErrors.inc({ controller: name });
        metrics.reconcileTotal.inc({ controller: name, result: 'error' });
        metrics.reconcileErrorsTotal.inc({ controller: name });
        // The retry is a whole reconcile, whatever the failed one was.
        this.changed.add(key);
        const retryMs = this.queue.addRateLimited(key);
        this.logger.warn(
          { err, object: key, retryMs, failures: this.queue.failuresOf(key) },
          'reconcile failed',
        );
      } finally {
        this.queue.done(key);
      }
    }
  }
}
