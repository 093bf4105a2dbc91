// An informer: list, then watch from the list's resourceVersion, keeping a local cache. It owns
// the watch: client-node's Watch ends on errors and on idle timeouts and does not restart
// (client-node #364 and friends), so every end restarts it here, at once after a normal server
// close and with exponential backoff after a failure; a 410 Gone (history compacted) relists.
// resync() re-delivers every cached object so level-based reconcilers heal drift.
import type { Logger } from '#common/logger.ts';
import { isGone, type KubeClient, type KubeObject, type Resource, type WatchHandle } from './kube.ts';

export type InformerEvent = 'add' | 'update' | 'delete';
export type InformerHandler<T> = (event: InformerEvent, object: T) => void;

export interface InformerOptions {
  namespace?: string;
  labelSelector?: string;
  /** Server-side watch timeout (random in [t, 2t) like client-go, so watches do not end together). */
  watchTimeoutSeconds?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

const DEFAULT_WATCH_TIMEOUT_SECONDS = 300;
const DEFAULT_MIN_BACKOFF_MS = 200;
const DEFAULT_MAX_BACKOFF_MS = 30_000;

export const objectKey = (o: { metadata: { name: string; namespace?: string } }) =>
  o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;

export class Informer<T extends KubeObject> {
  readonly resource: Resource;
  private readonly client: KubeClient;
  private readonly logger: Logger;
  private readonly options: Required<Omit<InformerOptions, 'namespace' | 'labelSelector'>> & InformerOptions;
  private readonly store = new Map<string, T>();
  private readonly handlers: InformerHandler<T>[] = [];
  private resourceVersion = '';
  private handle: WatchHandle | undefined;
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private stopped = true;
  private lastEventAt = 0;
  private syncedOnce = false;
  private readonly syncWaiters: Array<() => void> = [];
  /** Watches that ended with an error and were restarted (for tests and logs). */
  restarts = 0;

  constructor(client: KubeClient, resource: Resource, logger: Logger, options: InformerOptions = {}) {
    this.client = client;
    this.resource = resource;
    this.logger = logger.child({ informer: resource.plural });
    this.options = {
      watchTimeoutSeconds: DEFAULT_WATCH_TIMEOUT_SECONDS,
      minBackoffMs: DEFAULT_MIN_BACKOFF_MS,
      maxBackoffMs: DEFAULT_MAX_BACKOFF_MS,
      ...options,
    };
  }

  on(handler: InformerHandler<T>): void {
    this.handlers.push(handler);
  }

  get(key: string): T | undefined {
    return this.store.get(key);
  }

  list(): T[] {
    return [...this.store.values()];
  }

  /** Seconds since the last list or watch event (bookmarks count); -1 before the first. */
  silenceSeconds(): number {
    return this.lastEventAt ? (Date.now() - this.lastEventAt) / 1000 : -1;
  }

  get synced(): boolean {
    return this.syncedOnce;
  }

  /** Starts listing and watching; resolves after the first successful list. */
  start(): Promise<void> {
    this.stopped = false;
    const synced = new Promise<void>((resolve) => this.syncWaiters.push(resolve));
    void this.relist();
    return synced;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.handle?.abort();
    this.handle = undefined;
    for (const w of this.syncWaiters.splice(0)) w();
  }

  /** Delivers every cached object as an update (periodic resync). */
  resync(): void {
    for (const o of this.store.values()) this.emit('update', o);
  }

  private emit(event: InformerEvent, object: T): void {
    for (const h of this.handlers) {
      try {
        h(event, object);
      } catch (err) {
        this.logger.error({ err }, 'informer handler failed');
      }
    }
  }

  private async relist(): Promise<void> {
    if (this.stopped) return;
    try {
      const { items, resourceVersion } = await this.client.list<T>(this.resource, {
        namespace: this.options.namespace,
        labelSelector: this.options.labelSelector,
      });
      if (this.stopped) return;
      const seen = new Set<string>();
      for (const item of items) {
        const key = objectKey(item);
        seen.add(key);
        const had = this.store.has(key);
        this.store.set(key, item);
        this.emit(had ? 'update' : 'add', item);
      }
      for (const [key, old] of this.store) {
        if (!seen.has(key)) {
          this.store.delete(key);
          this.emit('delete', old);
        }
      }
      this.resourceVersion = resourceVersion;
      this.lastEventAt = Date.now();
      if (!this.syncedOnce) {
        this.syncedOnce = true;
        for (const w of this.syncWaiters.splice(0)) w();
      }
      this.failures = 0;
      await this.watch();
    } catch (err) {
      this.retry(err, true);
    }
  }

  private async watch(): Promise<void> {
    if (this.stopped) return;
    const t = this.options.watchTimeoutSeconds;
    const timeoutSeconds = Math.floor(t + Math.random() * t);
    try {
      const handle = await this.client.watch(
        this.resource,
        {
          namespace: this.options.namespace,
          labelSelector: this.options.labelSelector,
          resourceVersion: this.resourceVersion,
          timeoutSeconds,
        },
        (type, object) => this.onWatchEvent(type, object as T),
        (err) => {
          if (this.stopped) return;
          this.handle = undefined;
          if (!err) {
            // The server ended the watch (its timeout): resume from where we are.
            void this.watch();
            return;
          }
          this.retry(err, isGone(err));
        },
      );
      if (this.stopped) handle.abort();
      else this.handle = handle;
    } catch (err) {
      this.retry(err, isGone(err));
    }
  }

  private onWatchEvent(type: string, object: T): void {
    this.lastEventAt = Date.now();
    this.failures = 0;
    const rv = object.metadata?.resourceVersion;
    if (rv) this.resourceVersion = rv;
    if (type === 'BOOKMARK') return;
    const key = objectKey(object);
    if (type === 'DELETED') {
      this.store.delete(key);
      this.emit('delete', object);
    } else {
      const had = this.store.has(key);
      this.store.set(key, object);
      this.emit(had ? 'update' : 'add', object);
    }
  }

  private retry(err: unknown, relist: boolean): void {
    if (this.stopped) return;
    this.failures += 1;
    this.restarts += 1;
    const delay = Math.min(
      this.options.maxBackoffMs,
      this.options.minBackoffMs * 2 ** Math.min(this.failures - 1, 20),
    );
    this.logger.warn(
      { err: err instanceof Error ? err.message : String(err), retryMs: delay, relist },
      'watch ended, restarting',
    );
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void (relist ? this.relist() : this.watch()), delay);
    this.timer.unref();
  }
}
