// Leases given back on demand (docs/adr/0073): a draw denied while other gateways' leases hold
// bytes of the same account and product writes a 'give_back' change (lease_give_back_request);
// every gateway hears it through the change feed (common/src/db/changes.ts, docs/adr/0005) and
// the ones holding such leases give back what they do not need (Ledger.giveBack): an idle budget
// all of it, a busy one what it holds beyond about 2 s of its rate. The refused gateway, which
// polls for contended bytes for up to 2 s before answering 402, then gets them.
import type { Change } from '#common/db/changes.ts';

export interface GivesBack {
  readonly plan: string;
  giveBack(accountId: string): void;
}

/** Passes the feed's give-back requests to the ledger of their product; returns how many. */
export function giveBackOnChanges(changes: readonly Change[], ledgers: Iterable<GivesBack>): number {
  let n = 0;
  for (const c of changes) {
    if (c.kind !== 'give_back') continue;
    for (const ledger of ledgers) {
      if (ledger.plan !== c.subject) continue;
      ledger.giveBack(c.accountId);
      n++;
    }
  }
  return n;
}
