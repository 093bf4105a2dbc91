// How long an admin change (a proxy password reset) takes to reach the pods, for
// loadtest/db-load.ts. A pod has the change when its credential cache holds the account's new
// password, whatever change brought it there: the reset itself (`proxy_credentials`), or a
// snapshot after a reconnect, which delivers every account as an `account` change (counting only
// the first dropped exactly the pods that had to re-snapshot: survivor bias). Each pod counts once.
// Timed from the commit (the admin call resolved: the admin pool's own wait and the commit are
// not the fan-out's) and, as a second figure, from the request. A pod that applied it before the
// call resolved counts 0 ms from the commit.
import { createHash } from 'node:crypto';
import { Calls } from './measure.ts';

interface Change {
  requestedAt: number;
  /** Pods to reach (those running when it was requested). */
  pods: number;
  committedAt?: number;
  /** The new password's SHA-256, hex (known once the call resolved). */
  hash?: string;
  /** Pods that hold it. */
  done: Set<string>;
  /** Applies seen before the call resolved: checked against the hash once it is known. */
  early: { pod: string; at: number; hash: string | undefined }[];
}

export class FanoutTimer {
  /** Commit to one pod applied (each pod a sample), and to every pod applied (one per change). */
  readonly fromCommit = { each: new Calls(), all: new Calls() };
  readonly fromRequest = { each: new Calls(), all: new Calls() };
  private readonly changes = new Map<string, Change>();

  /** Whether a change of the account is still on its way (one at a time per account). */
  pending(accountId: string): boolean {
    return this.changes.has(accountId);
  }

  requested(accountId: string, pods: number, at: number): void {
    this.changes.set(accountId, { requestedAt: at, pods, done: new Set(), early: [] });
  }

  /** The admin call resolved with the new password at `at`; the applies seen so far are counted. */
  committed(accountId: string, password: string, at: number): void {
    const c = this.changes.get(accountId);
    if (!c) return;
    c.committedAt = at;
    c.hash = createHash('sha256').update(password).digest('hex');
    for (const e of c.early.splice(0)) this.applied(e.pod, accountId, e.at, e.hash);
  }

  failed(accountId: string): void {
    this.changes.delete(accountId);
  }

  /** Pod `pod` applied a change of the account at `at`; its cache now holds `hash`. */
  applied(pod: string, accountId: string, at: number, hash: string | undefined): void {
    const c = this.changes.get(accountId);
    if (!c || c.done.has(pod)) return;
    if (c.committedAt === undefined) {
      c.early.push({ pod, at, hash });
      return;
    }
    if (hash !== c.hash) return;
    c.done.add(pod);
    this.fromCommit.each.add(Math.max(0, at - c.committedAt));
    this.fromRequest.each.add(at - c.requestedAt);
    if (c.done.size < c.pods) return;
    this.fromCommit.all.add(Math.max(0, at - c.committedAt));
    this.fromRequest.all.add(at - c.requestedAt);
    this.changes.delete(accountId);
  }

  reset(): void {
    for (const calls of [this.fromCommit, this.fromRequest]) for (const c of Object.values(calls)) c.reset();
  }
}
