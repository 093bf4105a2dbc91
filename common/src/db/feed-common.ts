// What the change feed and the relay's client share: their gauges and their set of applied ids.
import { Gauge, type Registry } from 'prom-client';

/** The feed's silence and version as gauges (the change feed's and the relay stream's alike). */
export function registerFeedGauges(
  registry: Registry,
  component: string,
  feed: { silenceMs(): number; readonly version: number },
): void {
  new Gauge({
    name: `proxyfleet_${component}_change_feed_silence_seconds`,
    help: 'Seconds since the change feed last heard from the database (notification or heartbeat)',
    registers: [registry],
    collect() {
      const ms = feed.silenceMs();
      this.set(Number.isFinite(ms) ? ms / 1000 : -1);
    },
  });
  new Gauge({
    name: `proxyfleet_${component}_cache_version`,
    help: 'Highest change_log id this process has applied to its caches',
    registers: [registry],
    collect() {
      this.set(feed.version);
    },
  });
}

/** Forgets the applied ids more than `overlap` below `version`, once the set is twice that size. */
export function pruneApplied(ids: Set<number>, version: number, overlap: number): void {
  if (ids.size <= 2 * overlap) return;
  const floor = version - overlap;
  for (const id of ids) if (id <= floor) ids.delete(id);
}
