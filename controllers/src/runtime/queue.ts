// A de-duplicating work queue with per-key exponential backoff, after client-go's workqueue: a key
// is queued at most once; a key being processed that is added again is re-queued when done (never
// processed twice at once); failures back off per key (base * 2^failures, capped) until forget().
export interface QueueOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Observers for client-go's workqueue metrics (metrics.ts). */
  hooks?: QueueHooks;
}

export interface QueueHooks {
  /** A key entered the queue (not counted when it was already waiting). */
  added(): void;
  /** A key left the queue for a worker after waiting this long. */
  waited(seconds: number): void;
  /** A failed key was scheduled again with backoff. */
  retried(): void;
}

const DEFAULT_BASE_DELAY_MS = 100;
const DEFAULT_MAX_DELAY_MS = 60_000;

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  private readonly addedAt = new Map<string, number>();
  private readonly hooks: QueueHooks | undefined;
  private closed = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(options: QueueOptions = {}) {
    this.baseDelayMs = options.baseDelayMs ?? DEFAULT_BASE_DELAY_MS;
    this.maxDelayMs = options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS;
    this.hooks = options.hooks;
  }

  /** Keys waiting (not counting those being processed or scheduled for later). */
  get length(): number {
    return this.queue.length;
  }

  add(key: string): void {
    if (this.closed || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.hooks?.added();
    if (!this.addedAt.has(key)) this.addedAt.set(key, Date.now());
    if (this.processing.has(key)) return; // done() re-queues it
    const waiter = this.waiters.shift();
    if (waiter) {
      this.dirty.delete(key);
      this.startProcessing(key);
      waiter(key);
    } else {
      this.queue.push(key);
    }
  }

  private startProcessing(key: string): void {
    this.processing.add(key);
    const at = this.addedAt.get(key);
    this.addedAt.delete(key);
    if (at !== undefined) this.hooks?.waited((Date.now() - at) / 1000);
  }

  /** Adds the key after `ms`; an earlier pending schedule for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.closed) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Re-adds a key that failed, after its backoff; returns the delay used. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.hooks?.retried();
    const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** Math.min(n, 30));
    this.addAfter(key, delay);
    return delay;
  }

  /** The key succeeded: its backoff starts over. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** The next key, waiting for one; undefined once the queue is shut down. */
  get(): Promise<string | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.startProcessing(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Processing of `key` ended; if it was added meanwhile it goes back in the queue. */
  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  shutdown(): void {
    this.closed = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
    this.addedAt.clear();
  }
}
