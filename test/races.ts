// Racing mutating routes over HTTP (api/src/concurrency.int.test.ts and the suites RACED_ELSEWHERE
// names): a case runs rounds of calls sent at once against one object; no answer may be a 5xx or
// a status the route does not document for that situation, and the case's invariant must hold.
import type { CallResult } from './api.ts';

/** Rounds per case unless it says otherwise. */
export const ROUNDS = 8;

export const count = (results: CallResult[], status: number) =>
  results.filter((r) => r.status === status).length;

/** One call of a round and the statuses its route documents for what the race can do to it. */
export type Racer = [allowed: number[], send: () => Promise<CallResult>];

export interface Race<T> {
  name: string;
  /** The routes the case sends ("METHOD /prefix/path" as the router mounts them). */
  covers: string[];
  /** ROUNDS unless given: a race that loses only now and then gets more. */
  rounds?: number;
  /** Builds a round's objects (sequentially, before the race). */
  setup: (round: number) => Promise<T>;
  /** The calls sent at once. */
  racers: (ctx: T, round: number) => Racer[];
  /** The invariant after the round; results are in the order of racers. */
  check?: (ctx: T, results: CallResult[]) => Promise<void> | void;
}

export const race = <T>(r: Race<T>) => r as Race<unknown>;

/** Runs a case's rounds; answers what went wrong, e.g. "round 3: POST /x answered 500 (...)". */
export async function runRace(r: Race<unknown>): Promise<string[]> {
  const problems: string[] = [];
  for (let round = 0; round < (r.rounds ?? ROUNDS); round++) {
    const ctx = await r.setup(round);
    const racers = r.racers(ctx, round);
    const results = await Promise.all(racers.map(([, send]) => send()));
    results.forEach((res, i) => {
      const allowed = racers[i]![0];
      if (res.status >= 500 || !allowed.includes(res.status))
        problems.push(
          `round ${round}: call ${i} answered ${res.status} (allowed ${allowed.join('/')}): ` +
            JSON.stringify(res.body).slice(0, 300),
        );
    });
    if (r.check && results.every((res) => res.status < 500)) {
      try {
        await r.check(ctx, results);
      } catch (err) {
        problems.push(`round ${round}: invariant: ${(err as Error).message}`);
      }
    }
  }
  return problems;
}

/**
 * Mutating routes raced by a suite of their own, which checks that it covers exactly these:
 * api/src/modules/billing/concurrency.int.test.ts (purchases, invoice settlement, billing details).
 */
export const RACED_IN_BILLING = [
  'POST /api/v1/purchases',
  'PUT /api/v1/billing-details',
  'POST /admin/v1/invoices/:invoiceId/paid',
  'POST /admin/v1/invoices/:invoiceId/void',
];

/** Every mutating route raced outside api/src/concurrency.int.test.ts. */
export const RACED_ELSEWHERE = [
  ...RACED_IN_BILLING,
  // api/src/modules/cards/cards.int.test.ts (two tabs with one key; the setup is one customer per account).
  'POST /api/v1/card-purchases',
  'POST /api/v1/card/setup',
  // api/src/modules/subscriptions/subscribe.int.test.ts (one key three times, another body under it).
  'POST /api/v1/subscriptions',
];
