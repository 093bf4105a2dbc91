// The budget policy without I/O: each rule on plain state, and a property test that whatever
// interleaving of spends, ticks, flushes, grants, denials, outages and fleet sizes happens, what
// one gateway serves a budget never passes the documented bound (docs/adr/0024).
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  admission,
  DENIAL_RECHECK_MS,
  canAdmit,
  cutOff,
  denied,
  drawSettled,
  budgetPressure,
  drawStarted,
  granted,
  HOLD_AT_BYTES,
  leaseRequestSize,
  LEASE_TARGET_SECONDS,
  MAX_LEASE_BYTES,
  UNAVAILABLE_RECHECK_MS,
  OVERDRAFT_BYTES,
  PER_CONNECTION_SLACK_BYTES,
  pressure,
  tick,
  verdict,
  waitForContended,
} from './policy.ts';
import { INITIAL_LEASE_BYTES, newBudgetState, type BudgetState } from './budget-state.ts';
import { allocate, settleLeases } from './lease-book.ts';
import { relayed } from './lease-client.ts';
import { failed, OUTAGE_CREDIT_BYTES, outageCredit } from './outage-credit.ts';

const MiB = 1024 * 1024;
const lease = (id: string, bytes: number) => ({ id, granted: bytes, expiresAt: 10_000_000 });

/** A budget with one granted lease of `bytes` at time 1 ms. */
function withLease(bytes: number): BudgetState {
  const s = newBudgetState();
  drawStarted(s);
  granted(s, lease('a', bytes), bytes, 1);
  drawSettled(s);
  return s;
}

/**
 * One connection relays 64 KiB chunks, 3 a tick, for 12 ticks (3 s: LEASE_QUERY_TIMEOUT_MS,
 * how long the draw may stay pending), as the ledger runs the policy; `held`: it stops at a hold
 * (a download), or not (an upload). Returns the bytes relayed until the cut or the end.
 */
function relay(s: BudgetState, held: boolean): number {
  let relayed = 0;
  for (let t = 0; t < 12; t++) {
    for (let c = 0; c < 3; c++) {
      relayed += 64 * 1024;
      s.estimate += 64 * 1024;
      if (s.estimate <= s.trigger) continue;
      const d = pressure(s);
      if (d === 'cut') return relayed;
      if (d === 'hold' && held) return relayed;
      if ((d === 'draw' || d === 'redraw') && !s.pending) drawStarted(s);
    }
    allocate(s, s.estimate);
    tick(s, 250, 30 + 250 * t, true);
  }
  return relayed;
}

describe('budget policy', () => {
  it('admits while the leases hold bytes, and asks the database otherwise', () => {
    const s = newBudgetState();
    expect(admission(s, 0)).toBe('ask');
    const g = withLease(MiB);
    expect(admission(g, 0)).toBe('ok');
    g.estimate = MiB;
    expect(canAdmit(g)).toBe(false);
  });

  it('draws the next lease when half of the last grant is spent (prefetch), not when it runs out', () => {
    const s = withLease(4 * MiB);
    s.estimate = 2 * MiB - 1;
    expect(s.estimate > s.trigger).toBe(false);
    s.estimate = 2 * MiB + 1;
    expect(s.estimate > s.trigger).toBe(true);
    expect(pressure(s)).toBe('draw');
    // Still half after a tick replaced the estimate with exact counts.
    const t = withLease(4 * MiB);
    allocate(t, MiB);
    tick(t, 250, 250, true);
    t.estimate = MiB + 1;
    expect(t.estimate > t.trigger).toBe(true);
  });

  it('sizes the next lease from the rate observed since the last grant', () => {
    const s = withLease(4 * MiB);
    s.estimate = 2 * MiB;
    // Half of 4 MiB in 100 ms: 20 MiB/s, LEASE_TARGET_SECONDS of it (past the fast-spend x4).
    expect(leaseRequestSize(s, 101)).toBe(Math.min(MAX_LEASE_BYTES, 20 * MiB * LEASE_TARGET_SECONDS));
    const slow = withLease(4 * MiB);
    slow.estimate = 2 * MiB;
    expect(leaseRequestSize(slow, 60_000)).toBe(INITIAL_LEASE_BYTES);
  });

  it('holds past half the overdraft while a grant is pending and cuts past all of it', () => {
    const s = withLease(MiB);
    s.estimate = MiB / 2 + 1;
    drawStarted(s);
    s.estimate = MiB + HOLD_AT_BYTES / 2;
    expect(pressure(s)).toBe('none');
    s.estimate = MiB + HOLD_AT_BYTES + 1;
    expect(pressure(s)).toBe('hold');
    s.estimate = MiB + OVERDRAFT_BYTES + 1;
    expect(pressure(s)).toBe('cut');
  });

  it('cuts at the end of the leases after a denial, and answers 402 only then', () => {
    const s = withLease(MiB);
    drawStarted(s);
    denied(s, 0, 5);
    s.estimate = MiB + 1;
    expect(drawSettled(s)).toBe('cut');
    expect(verdict(s)).toBe('denied');
    expect(admission(s, 10)).toBe('refuse');
  });

  it('after a denial draws again at half of what the leases hold, down to 64 KiB, and once more when spent (docs/adr/0097)', () => {
    const s = withLease(4 * MiB);
    drawStarted(s);
    denied(s, 0, 5);
    expect(drawSettled(s)).toBe('none');
    const redrawsAt: number[] = [];
    for (let spent = 0; spent <= 4 * MiB + 4096; spent += 1024) {
      s.estimate = spent;
      if (spent <= s.trigger) continue;
      const d = pressure(s);
      if (d === 'cut') break;
      expect(d).toBe('redraw');
      redrawsAt.push(spent);
      drawStarted(s);
      denied(s, 0, 6);
      expect(drawSettled(s)).toBe(spent > 4 * MiB ? 'cut' : 'none');
    }
    // 2, 3, 3.5, ... MiB: each at half of what was left, the last one past the leases.
    expect(redrawsAt.slice(0, 3)).toEqual([2 * MiB + 1024, 3 * MiB + 1024, 3.5 * MiB + 1024]);
    expect(redrawsAt.at(-1)).toBe(4 * MiB + 1024);
    expect(redrawsAt.length).toBeLessThanOrEqual(8);
    // Denied again past the leases: cut, and no draw after that.
    s.estimate += 1024;
    expect(pressure(s)).toBe('cut');
  });

  it('reports each lease spent up to the moment of asking: the last tick plus the estimate since (docs/adr/0097)', () => {
    const s = withLease(MiB);
    drawStarted(s);
    granted(s, lease('b', MiB), MiB, 2);
    drawSettled(s);
    allocate(s, MiB / 2);
    s.estimate = MiB;
    // Oldest first, as the next tick will charge it: 'a' full, the rest on 'b'.
    expect(relayed(s)).toEqual([
      ['a', MiB],
      ['b', MiB / 2],
    ]);
    s.estimate = 2 * MiB;
    expect(relayed(s)).toEqual([
      ['a', MiB],
      ['b', 1.5 * MiB],
    ]);
  });

  it('asks again after a denial while other gateways held leases: they give back what they do not need', () => {
    const s = withLease(MiB);
    drawStarted(s);
    denied(s, 4 * MiB, 5);
    s.estimate = MiB + 1;
    expect(drawSettled(s)).toBe('cut');
    expect(admission(s, 10)).toBe('ask');
    expect(waitForContended(s)).toBe(true);
  });

  it('does not wait for give-back while the database cannot be asked: the wait starts once it answers', () => {
    // The failover scenario: an admission that began in the outage spent its 2 s on failures, was
    // denied at the promotion and answered 402 1.3 s later, before the others heard the give-back.
    const s = withLease(MiB);
    drawStarted(s);
    denied(s, 4 * MiB, 5);
    s.estimate = MiB + 1;
    drawSettled(s);
    drawStarted(s);
    failed(s, true, 0, 10);
    drawSettled(s);
    expect([waitForContended(s), verdict(s)]).toEqual([false, 'unavailable']);
  });

  it('answers 503 (stranded), not 402, when what is left sits in leases of a gateway that stopped', () => {
    const s = withLease(MiB);
    drawStarted(s);
    denied(s, 4 * MiB, 5, 4 * MiB);
    s.estimate = MiB + 1;
    expect(verdict(s)).toBe('stranded');
    denied(s, 4 * MiB, 6, 0);
    expect(verdict(s)).toBe('denied');
  });

  it('gives a known customer its share of the outage credit once, and 503 after', () => {
    expect(outageCredit(10 * OUTAGE_CREDIT_BYTES, 1)).toBe(OUTAGE_CREDIT_BYTES);
    expect(outageCredit(10 * OUTAGE_CREDIT_BYTES, 3)).toBe(Math.floor(OUTAGE_CREDIT_BYTES / 3));
    expect(outageCredit(30 * MiB, 3)).toBe(10 * MiB);
    expect(outageCredit(30 * MiB, 0)).toBe(30 * MiB);
    expect(outageCredit(0, 1)).toBe(0);
    const s = withLease(MiB);
    s.estimate = MiB;
    drawStarted(s);
    expect(failed(s, true, outageCredit(30 * MiB, 3), 1)).toBe(true);
    drawSettled(s);
    expect(s.available).toBe(11 * MiB);
    drawStarted(s);
    expect(failed(s, true, outageCredit(30 * MiB, 3), 2)).toBe(false);
    drawSettled(s);
    expect(verdict({ ...s, estimate: s.available })).toBe('unavailable');
    const unknown = newBudgetState();
    expect(failed(unknown, false, MiB, 1)).toBe(false);
    expect(verdict(unknown)).toBe('unavailable');
  });

  it('asks the database again soon after a failed lease request, and only later after a denial', () => {
    const down = newBudgetState();
    drawStarted(down);
    expect(failed(down, false, 0, 1_000)).toBe(false);
    drawSettled(down);
    expect(admission(down, 1_000 + UNAVAILABLE_RECHECK_MS - 1)).toBe('refuse');
    // The database may be back: ask (this refused for DENIAL_RECHECK_MS, 2 s, before).
    expect(admission(down, 1_000 + UNAVAILABLE_RECHECK_MS)).toBe('ask');
    const none = newBudgetState();
    none.deniedAt = 1_000;
    expect(admission(none, 1_000 + UNAVAILABLE_RECHECK_MS)).toBe('refuse');
    expect(admission(none, 1_000 + DENIAL_RECHECK_MS)).toBe('ask');
  });

  it('after a cut, admits nothing before a grant: 503 in an outage whose credit is spent, not admit-then-cut', () => {
    // A cut leaves unspent what was read but never delivered. Admitting on it let every new
    // request in only to cut it a moment later (fleet-credit.int.test.ts: -1 forty times, no 503).
    const s = withLease(MiB);
    allocate(s, MiB - 100 * 1024);
    cutOff(s);
    expect(s.available).toBeGreaterThan(0);
    expect(canAdmit(s)).toBe(false);
    expect(admission(s, 10)).toBe('ask');
    drawStarted(s);
    expect(failed(s, true, 0, 10)).toBe(false);
    drawSettled(s);
    expect(verdict(s)).toBe('unavailable');
    drawStarted(s);
    granted(s, lease('b', MiB), 0, 20);
    drawSettled(s);
    expect(canAdmit(s)).toBe(true);
  });

  it('a draw again after a denial continues its overdraft, it does not start a new one', () => {
    // The property test below found it (CI): each redraw reset what the pending draw had run past
    // the leases, so a denial then a redraw let a budget overdraw OVERDRAFT_BYTES twice.
    const s = withLease(1);
    drawStarted(s);
    allocate(s, 200 * 1024);
    denied(s, 0, 10);
    drawStarted(s);
    s.estimate += 100 * 1024;
    expect(pressure(s)).toBe('cut');
  });

  it('a draw again after a failed one with no outage credit continues its overdraft: nothing covered it', () => {
    // The property test below found it (seed -1952988778): 1 byte bought and granted, 193 KiB
    // relayed past it while the next draw was pending, that draw failed with no credit (the last
    // free balance was 0), and the draw after it started a second OVERDRAFT_BYTES.
    const s = withLease(1);
    drawStarted(s);
    allocate(s, 193 * 1024);
    expect(failed(s, true, 0, 10)).toBe(false);
    expect(drawSettled(s)).toBe('none');
    s.estimate = 1;
    expect(pressure(s)).toBe('redraw');
    drawStarted(s);
    s.estimate += 64 * 1024;
    expect(pressure(s)).toBe('cut');
  });

  it('a draw after a failed one that gave outage credit starts its own overdraft: the credit covers the last', () => {
    const s = withLease(1);
    drawStarted(s);
    allocate(s, 193 * 1024);
    expect(failed(s, true, MiB, 10)).toBe(true);
    drawSettled(s);
    allocate(s, MiB);
    drawStarted(s);
    s.estimate = HOLD_AT_BYTES;
    expect(pressure(s)).toBe('none');
  });

  describe('the overdraft when a flush hands back a spent lease (settleLeases)', () => {
    /**
     * 1 byte granted, 193 KiB relayed past it while the next draw was pending and counted exactly
     * (a tick), then that draw answered `answer` with the estimate at 0 (no cut), and the flush
     * handed back the spent lease (settleLeases: spent and denied).
     */
    function handedBack(answer: 'denied' | 'failed without credit'): BudgetState {
      const s = withLease(1);
      drawStarted(s);
      allocate(s, 193 * 1024);
      tick(s, 250, 10, true);
      if (answer === 'denied') denied(s, 0, 10);
      else expect(failed(s, true, 0, 10)).toBe(false);
      expect(drawSettled(s)).toBe('none');
      settleLeases(s, 20, false);
      expect(s.leases).toEqual([]);
      return s;
    }

    it.each([
      ['denied', 'an upload (not held)', false],
      ['denied', 'a download (held)', true],
      ['failed without credit', 'an upload (not held)', false],
      ['failed without credit', 'a download (held)', true],
    ] as const)(
      'after a draw %s, %s stays within the one overdraft and its connection slack',
      (answer, _, held) => {
        // Before, the overdraft of a draw with no lease was the estimate alone, which each tick
        // restarts: an upload under 256 KiB a tick was never cut (2,304 KiB in these 3 s).
        const s = handedBack(answer);
        const past = 193 * 1024 + relay(s, held);
        expect(past).toBeLessThanOrEqual(OVERDRAFT_BYTES + PER_CONNECTION_SLACK_BYTES);
        expect(s.pending).toBe(true);
      },
    );

    it("after a grant, the next draw's overdraft does not grow by what the lease handed back was overrun", () => {
      // Before, the draw took the leases' overrun as its start (200 KiB, all of it on 'a'), and
      // when the flush handed 'a' back the overdraft on 'b' counted only past those 200 KiB.
      const s = withLease(1);
      drawStarted(s);
      allocate(s, 200 * 1024);
      tick(s, 250, 10, true);
      granted(s, lease('b', 1), 1, 20);
      drawSettled(s);
      drawStarted(s);
      settleLeases(s, 30, false);
      expect(s.leases.map((l) => l.id)).toEqual(['b']);
      expect(relay(s, false)).toBeLessThanOrEqual(OVERDRAFT_BYTES + PER_CONNECTION_SLACK_BYTES);
    });
  });

  it('an outage credit covers the overdraft run so far only up to its size', () => {
    // The property test found it at 10,000 runs (seed -1761323759): a 1-byte credit (the account's
    // last free balance was about that) after 193 KiB past the leases started a second
    // OVERDRAFT_BYTES, the credit having covered all 193 KiB.
    const s = withLease(1);
    drawStarted(s);
    allocate(s, 193 * 1024);
    expect(failed(s, true, 1, 10)).toBe(true);
    drawSettled(s);
    const past = 193 * 1024 + relay(s, false);
    expect(past).toBeLessThanOrEqual(OVERDRAFT_BYTES + PER_CONNECTION_SLACK_BYTES + 1);
  });

  it('keeps a spent last lease to absorb the overdraft, and returns everything when idle', () => {
    const s = withLease(MiB);
    allocate(s, MiB + 100);
    expect(settleLeases(s, 0, false)).toEqual({ spends: [['a', MiB + 100]], releases: [] });
    expect(settleLeases(s, 0, true)).toEqual({ spends: [], releases: [['a', MiB + 100]] });
    expect(s.leases).toEqual([]);
  });
});

// ---- the bound, as a property -------------------------------------------------------------------

type Op =
  | { kind: 'chunk'; conn: number; bytes: number }
  | { kind: 'answer'; answer: 'grant' | 'deny' | 'fail'; bytes: number; free: number }
  | { kind: 'tick' }
  | { kind: 'flush' }
  | { kind: 'fleet'; size: number };

const CONNS = 4;
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 24,
    arbitrary: fc.record({
      kind: fc.constant('chunk' as const),
      conn: fc.nat(CONNS - 1),
      bytes: fc.integer({ min: 1, max: 64 * 1024 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('answer' as const),
      answer: fc.constantFrom('grant' as const, 'deny' as const, 'fail' as const),
      bytes: fc.integer({ min: 1, max: 2 * MiB }),
      free: fc.integer({ min: 0, max: 256 * MiB }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'tick' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'flush' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('fleet' as const), size: fc.integer({ min: 1, max: 8 }) }),
  },
);

describe("a budget under pressure among its account's budgets (docs/adr/0037)", () => {
  /** A budget whose lease is spent, a grant pending, run `past` bytes beyond its leases. */
  function pending(past: number, grouped: boolean): { state: BudgetState } {
    const s = withLease(MiB);
    s.grouped = grouped;
    allocate(s, MiB);
    drawStarted(s);
    s.estimate = past;
    return { state: s };
  }

  it.each([
    ['alone, past half the overdraft', [[HOLD_AT_BYTES + 1, false]], 'hold'],
    ['alone, past the overdraft', [[OVERDRAFT_BYTES + 1, false]], 'cut'],
    [
      'grouped, under half the overdraft together',
      [
        [HOLD_AT_BYTES / 2, true],
        [HOLD_AT_BYTES / 4, true],
      ],
      'none',
    ],
    [
      'grouped, past half of it together',
      [
        [HOLD_AT_BYTES / 2 + 1, true],
        [HOLD_AT_BYTES / 2, true],
      ],
      'hold',
    ],
    [
      'grouped, past all of it together',
      [
        [OVERDRAFT_BYTES / 2 + 1, true],
        [OVERDRAFT_BYTES / 2, true],
      ],
      'cut',
    ],
  ] as const)('%s', (_, budgets, expected) => {
    const group = budgets.map(([past, grouped]) => pending(past, grouped));
    expect(budgetPressure(group[0]!.state, group)).toBe(expected);
  });

  it('draws when no grant is pending, alone or grouped', () => {
    for (const grouped of [false, true]) {
      const s = withLease(MiB);
      s.grouped = grouped;
      s.estimate = MiB;
      expect(budgetPressure(s, [{ state: s }])).toBe('draw');
    }
  });
});

describe('the bound', () => {
  it('what is served never passes the balance + overdraft + per-connection slack + outage credit', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 16 * MiB }),
        fc.array(op, { minLength: 100, maxLength: 2000, size: 'max' }),
        (balance, ops) => {
          // The ledger's loop on the policy, against a database that grants from what is free
          // (balance - used - leased, docs/adr/0020, the fold taken as instant: every byte billed,
          // and what the open leases still hold; credit is no lease there). A connection starts
          // (its first chunk) only when admitted, and then relays whether its budget holds a lease
          // or not (a flush hands back spent ones) until it is cut; held ones are not modelled as
          // stopping (uploads are not held), so holding is never what keeps the bound.
          const s = newBudgetState();
          let now = 0;
          let fleet = 1;
          let lastFree = balance;
          let credit = 0;
          let served = 0;
          const open = new Set<number>();
          const cut = new Set<number>();
          const cutAll = () => {
            for (let c = 0; c < CONNS; c++) cut.add(c);
          };
          const draw = () => {
            leaseRequestSize(s, now);
            drawStarted(s);
          };
          const act = (d: ReturnType<typeof pressure>) => {
            if (d === 'cut') cutAll();
            // After a denial the ledger asks again (docs/adr/0097): the bound must hold across it.
            else if (d === 'draw' || (d === 'redraw' && !s.pending)) draw();
          };
          draw();
          for (const o of ops) {
            now += 7;
            if (o.kind === 'fleet') fleet = o.size;
            else if (o.kind === 'tick' || o.kind === 'flush') {
              // Exact counts replace the estimate (the whole estimate was delivered here).
              allocate(s, s.estimate);
              if (tick(s, 250, now, cut.size < CONNS)) draw();
              // The flush settles the leases after its tick (ledger.ts): spent ones go back.
              if (o.kind === 'flush') settleLeases(s, now, false);
            } else if (o.kind === 'chunk') {
              if (cut.has(o.conn)) continue;
              if (!open.has(o.conn)) {
                if (!canAdmit(s)) continue;
                open.add(o.conn);
              }
              served += o.bytes;
              s.estimate += o.bytes;
              if (s.estimate > s.trigger) act(pressure(s));
            } else if (s.pending) {
              let leased = 0;
              for (const l of s.leases) if (l.id) leased += Math.max(0, l.granted - l.spent);
              const free = Math.max(0, balance - s.allocated - leased);
              if (o.answer === 'grant' && free > 0) {
                const bytes = Math.min(o.bytes, free);
                granted(s, lease(`l${now}`, bytes), bytes, now);
                lastFree = free - bytes;
              } else if (o.answer !== 'fail') {
                lastFree = 0;
                denied(s, 0, now);
              } else {
                const share = outageCredit(lastFree, fleet);
                if (failed(s, true, share, now)) credit += share;
              }
              if (drawSettled(s) === 'cut') cutAll();
              if (s.estimate > s.trigger && cut.size < CONNS) act(pressure(s));
            }
          }
          // Past the decision to cut, only the chunk each connection already read gets through: the
          // model's bound is tighter than the documented one (64 KiB < PER_CONNECTION_SLACK_BYTES,
          // which also covers write buffers and header blocks the model does not have). Credit:
          // each grant of it is this gateway's share of min(64 MiB, the last free balance).
          const CHUNK = 64 * 1024;
          expect(CHUNK).toBeLessThan(PER_CONNECTION_SLACK_BYTES);
          return served <= balance + OVERDRAFT_BYTES + CONNS * CHUNK + credit;
        },
      ),
      { numRuns: 500 },
    );
  });

  it('the credit of a fleet of N never passes min(64 MiB, free) in total', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 64 }), fc.nat(1024 * MiB), (n, free) => {
        return n * outageCredit(free, n) <= Math.min(OUTAGE_CREDIT_BYTES, free);
      }),
    );
  });
});
