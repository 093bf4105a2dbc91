// "Forgot password?" answers before anything about the email is looked at: the request only
// queues the email here and answers, the same work whether or not an account has it; this
// in-process job then looks the email up and, for an active account, creates the reset link and
// queues its email in the outbox (docs/security.md, "Forgot password"; docs/adr/0076). A queued
// ask lost to a crash costs the customer one more click; the request's per-address throttle bounds
// the queue, and a full queue drops the ask with a warning.
import type { Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import { activeAccountByEmail } from './repo.ts';
import { createPasswordLink } from './service.ts';

export const MAX_QUEUED_RESETS = 10_000;

export interface ResetRequestsDeps {
  pool: Pool;
  logger: Logger;
  /** Base URL of the link (configuration only: docs/security.md, "Links in emails"). */
  linkBase: () => string;
}

export class ResetRequests {
  private readonly queue: { email: string; ip: string | null }[] = [];
  private running: Promise<void> | undefined;
  private paused = false;
  private readonly deps: ResetRequestsDeps;

  constructor(deps: ResetRequestsDeps) {
    this.deps = deps;
  }

  /** Queues one ask (the email typed, the asker's address); returns at once, having looked at nothing. */
  enqueue(email: string, ip: string | null): void {
    if (this.queue.length >= MAX_QUEUED_RESETS) {
      this.deps.logger.warn({ queued: this.queue.length }, 'password reset queue full; ask dropped');
      return;
    }
    this.queue.push({ email, ip });
    this.kick();
  }

  /** Holds the job (tests look at what the request alone did); enqueue still queues. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.kick();
  }

  /** Resolves once every queued ask is handled (unless paused). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private kick(): void {
    if (this.running || this.paused || this.queue.length === 0) return;
    // After the current request's response: the job never delays the answer it follows.
    this.running = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.drain())
      .finally(() => {
        this.running = undefined;
        this.kick();
      });
  }

  private async drain(): Promise<void> {
    while (!this.paused && this.queue.length > 0) {
      const { email, ip } = this.queue.shift()!;
      try {
        const account = await activeAccountByEmail(this.deps.pool, email);
        // Recorded only for an account, in the link's transaction: the asker learns nothing of it
        // (the answer went out before), and the account's owner sees who asked, from where.
        if (account) {
          await createPasswordLink(this.deps.pool, account.accountId, 'reset', this.deps.linkBase(), {
            actor: { kind: 'dashboard', id: account.email, ip },
            action: 'password.reset_requested',
          });
        }
      } catch (err) {
        this.deps.logger.error({ err }, 'password reset ask failed');
      }
    }
  }
}
