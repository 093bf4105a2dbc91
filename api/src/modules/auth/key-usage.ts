// api_keys.last_used_at, written off the request path: at most once per TOUCH_EVERY_MS per key
// and process, in one batched UPDATE (a write per request would cost more than the request).
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { touchKeys } from './repo.ts';

const TOUCH_EVERY_MS = 60_000;
const FLUSH_EVERY_MS = 10_000;
const MAX_TRACKED = 100_000;

export class KeyUsageRecorder {
  private readonly touched = new Map<string, number>();
  private pending = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private readonly pool: Pool;
  private readonly logger: Logger;

  constructor(pool: Pool, logger: Logger) {
    this.pool = pool;
    this.logger = logger;
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  used(keyId: string): void {
    const now = Date.now();
    const last = this.touched.get(keyId);
    if (last !== undefined && now - last < TOUCH_EVERY_MS) return;
    if (this.touched.size >= MAX_TRACKED) this.touched.clear();
    this.touched.set(keyId, now);
    this.pending.add(keyId);
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const ids = [...this.pending];
    this.pending = new Set();
    await touchKeys(this.pool, ids).catch((err: Error) =>
      this.logger.warn({ err: err.message }, 'could not record key use'),
    );
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
