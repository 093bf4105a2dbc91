// `npx node loadtest/bench-history-tally.ts`: the CPU one access-log line spends in the usage
// history tally (gateway/src/accounting/history.ts), in ns per line, over 50 accounts and 5 rounds
// of 5,000,000 lines, flushed between rounds into a pool that answers at once. Compared with
// bench:gateway's CPU per request it bounds the counting's share (docs/benchmarks.md "Usage history").
import { createLogger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { HistoryTally } from '../gateway/src/accounting/history.ts';

const LINES = 5_000_000;
const ROUNDS = 5;
const ACCOUNTS = 50;
const pool = { query: () => Promise.resolve({ rows: [] }) } as unknown as Pool;
const tally = new HistoryTally({ pool, plan: 'basic', logger: createLogger('bench', 'silent') });
const accounts = Array.from(
  { length: ACCOUNTS },
  (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
);
for (let round = 0; round < ROUNDS; round++) {
  const start = process.cpuUsage();
  for (let i = 0; i < LINES; i++)
    tally.add(accounts[i % ACCOUNTS]!, '', true, 200, undefined, 300, 1200, true);
  const used = process.cpuUsage(start);
  process.stdout.write(
    `round ${round + 1}: ${(((used.user + used.system) * 1000) / LINES).toFixed(1)} ns per line\n`,
  );
  await tally.flush();
}
