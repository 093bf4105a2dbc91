// Bandwidth caps (docs/adr/0035): the bounds of a cap, read by the ProxyGateway spec's schema, the
// admin API's validation and the database's CHECK alike (migrations/0083 repeats them).

/** The smallest cap: one socket read (64 KiB) per second, bytes per second, fleet-wide. */
export const MIN_THROTTLE_BYTES_PER_SECOND = 64 * 1024;
/** The largest cap: 10 GB/s (80 Gbit/s), more than any account's fleet share moves. */
export const MAX_THROTTLE_BYTES_PER_SECOND = 10_000_000_000;
