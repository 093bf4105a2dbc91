import { describe, expect, it } from '@jest/globals';
import { createLogger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { OTHER, registrableDomain, TargetTally, type TargetRow } from './targets.ts';

describe('registrableDomain', () => {
  it.each([
    ['a.b.example.co.uk', 'example.co.uk'],
    ['WWW.Example.COM.', 'example.com'],
    ['a.example.localhost', 'example.localhost'],
    ['localhost', 'localhost'],
    ['203.0.113.7', '203.0.113.7'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['co.uk', 'co.uk'],
    ['a'.repeat(254), OTHER],
    ['', OTHER],
  ])('%s -> %s', (host, domain) => expect(registrableDomain(host)).toBe(domain));
});

describe('TargetTally bounds', () => {
  const capture = () => {
    const written: TargetRow[][] = [];
    const pool = {
      query: async (_sql: string, params: unknown[]) => {
        written.push(JSON.parse(params[0] as string) as TargetRow[]);
        return { rows: [] };
      },
    } as unknown as Pool;
    return { pool, written };
  };
  const logger = createLogger('test', 'silent');
  const now = Date.UTC(2026, 10, 25, 12);

  it('keeps perAccount domains per account and day, folds the rest into (other), and starts over after a flush', async () => {
    const { pool, written } = capture();
    const tally = new TargetTally({ pool, plan: 'basic', logger, perAccount: 2 });
    for (const host of ['a.com', 'b.com', 'c.com', 'd.com', 'a.com']) tally.add('acc', host, 10, now);
    tally.add('acc', 'z.com', 5, now + 24 * 3600_000);
    expect(tally.size).toBe(4);
    await tally.flush();
    expect(written[0]!.map((r) => [r.day, r.domain, r.bytes, r.requests])).toEqual([
      ['2026-11-25', 'a.com', 20, 2],
      ['2026-11-25', 'b.com', 10, 1],
      ['2026-11-25', OTHER, 20, 2],
      ['2026-11-26', 'z.com', 5, 1],
    ]);
    tally.add('acc', 'c.com', 1, now);
    expect(tally.size).toBe(1);
  });

  it("tallies per sub-user ('' for the account's own) under the account's one perAccount cap", async () => {
    const { pool, written } = capture();
    const tally = new TargetTally({ pool, plan: 'basic', logger, perAccount: 3 });
    tally.add('acc', 'a.com', 10, now);
    tally.add('acc', 'a.com', 7, now, 'sub1');
    tally.add('acc', 'b.com', 3, now, 'sub2');
    tally.add('acc', 'b.com', 4, now, 'sub2');
    // The cap counts the account's entries, its sub-users' included: sub-users do not multiply it.
    tally.add('acc', 'c.com', 5, now, 'sub1');
    tally.add('acc', 'c.com', 6, now);
    expect(tally.size).toBe(5);
    await tally.flush();
    expect(written[0]!.map((r) => [r.sub_user, r.domain, r.bytes, r.requests])).toEqual([
      ['', 'a.com', 10, 1],
      ['sub1', 'a.com', 7, 1],
      ['sub2', 'b.com', 7, 2],
      ['sub1', OTHER, 5, 1],
      ['', OTHER, 6, 1],
    ]);
  });

  it('holds at most maxEntries entries, dropping and counting what does not fit', () => {
    const { pool } = capture();
    const tally = new TargetTally({ pool, plan: 'basic', logger, perAccount: 100, maxEntries: 3 });
    for (let i = 0; i < 10; i++) tally.add(`acc${i}`, 'a.com', 1, now);
    expect(tally.size).toBe(3);
    expect(tally.dropped).toBe(7);
  });

  it('a failed write is logged, not thrown', async () => {
    const pool = { query: async () => Promise.reject(new Error('down')) } as unknown as Pool;
    const tally = new TargetTally({ pool, plan: 'basic', logger });
    tally.add('acc', 'a.com', 1, now);
    await expect(tally.flush()).resolves.toBeUndefined();
  });
});
