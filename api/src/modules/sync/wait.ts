// Makes admin changes take effect on every API process before the admin call answers: after the
// change commits, wait until every running API process (fresh cache_acks row) has applied a
// change_log version at or above the head read after the commit (docs/adr/0010).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from '#common/db/pool.ts';
import { countCacheAcks } from '#common/db/changes.ts';
import type { Logger } from '#common/logger.ts';
import { changeLogHead } from '#common/db/changes.ts';

const POLL_MS = 10;

export interface SyncResult {
  synced: number;
  total: number;
}

export type WaitForApiCaches = () => Promise<SyncResult>;

export function cacheSync(pool: Pool, logger: Logger, timeoutMs: number): WaitForApiCaches {
  return async () => {
    const head = await changeLogHead(pool);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const counts = await countCacheAcks(pool, 'api', head);
      if (counts.synced >= counts.total) return counts;
      if (Date.now() >= deadline) {
        logger.warn({ ...counts, version: head }, 'not every API process applied a change in time');
        return counts;
      }
      await sleep(POLL_MS);
    }
  };
}
