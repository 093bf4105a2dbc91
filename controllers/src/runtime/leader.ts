// Lease-based leader election (coordination.k8s.io/v1), after client-go's leaderelection: the
// holder renews every retryPeriod; another candidate takes the Lease only when it has seen the
// same record unchanged for leaseDuration by its own clock (no clock-skew assumptions between
// pods); a holder that cannot renew within renewDeadline stops leading before anyone else may
// start. Writes are conditional on resourceVersion, so two candidates never both win. Each
// attempt runs against its own deadline timer (the end of the renew deadline while leading),
// which aborts its API calls: a call that hangs (the server accepts but never answers) cannot
// keep a holder acting as leader after a peer may have taken the expired Lease.
import type { Logger } from '#common/logger.ts';
import { isConflict, type KubeClient, type KubeObject } from './kube.ts';
import { RESOURCES } from './resources.ts';

export interface LeaderElectionOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  /**
   * The pod this candidate runs in: named as the Lease's owner whenever this candidate creates or
   * takes it, so the garbage collector removes the Lease with its last holder (`helm uninstall`
   * leaves no Lease behind; a peer that takes over becomes the owner).
   */
  owner?: { apiVersion: 'v1'; kind: 'Pod'; name: string; uid: string };
  logger: Logger;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => Promise<void> | void;
  onStoppedLeading: () => Promise<void> | void;
}

interface Lease extends KubeObject {
  spec?: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    acquireTime?: string | null;
    renewTime?: string | null;
    leaseTransitions?: number;
  };
}

// client-go's defaults.
const DEFAULT_LEASE_DURATION_MS = 15_000;
const DEFAULT_RENEW_DEADLINE_MS = 10_000;
const DEFAULT_RETRY_PERIOD_MS = 2_000;

/** metav1.MicroTime: RFC 3339 with microseconds. */
const microTime = (d: Date) => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export class LeaderElector {
  private readonly o: Required<Omit<LeaderElectionOptions, 'owner'>> & Pick<LeaderElectionOptions, 'owner'>;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private observed: { rv: string; holder: string | null | undefined; at: number } | undefined;
  private lastRenew = 0;
  private attempt: AbortController | undefined;
  private transition: Promise<void> = Promise.resolve();

  constructor(options: LeaderElectionOptions) {
    this.o = {
      leaseDurationMs: DEFAULT_LEASE_DURATION_MS,
      renewDeadlineMs: DEFAULT_RENEW_DEADLINE_MS,
      retryPeriodMs: DEFAULT_RETRY_PERIOD_MS,
      ...options,
    };
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.stopped = false;
    void this.tick();
  }

  /** Stops competing; a leader stops its work, then releases the Lease so a peer takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.attempt?.abort(new Error('elector stopped'));
    await this.transition;
    if (this.leading) {
      this.leading = false;
      await this.o.onStoppedLeading();
      await this.release(AbortSignal.timeout(this.o.renewDeadlineMs)).catch((err: Error) =>
        this.o.logger.warn({ err: err.message }, 'could not release the lease'),
      );
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), this.o.retryPeriodMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    // The attempt's budget: what is left of the renew deadline while leading, else one deadline.
    const budgetMs = this.leading
      ? Math.max(0, this.lastRenew + this.o.renewDeadlineMs - Date.now())
      : this.o.renewDeadlineMs;
    const attempt = new AbortController();
    this.attempt = attempt;
    const timer = setTimeout(
      () => attempt.abort(new Error(`no answer within ${budgetMs} ms (renew deadline)`)),
      budgetMs,
    );
    // Enforced here as well, in case an HTTP call does not honour its signal.
    const deadline = new Promise<never>((_, reject) =>
      attempt.signal.addEventListener('abort', () => reject(attempt.signal.reason as Error), { once: true }),
    );
    try {
      const ok = await Promise.race([this.tryAcquireOrRenew(attempt.signal), deadline]);
      if (this.stopped) return;
      if (ok) {
        this.lastRenew = Date.now();
        if (!this.leading) {
          this.leading = true;
          this.o.logger.info({ identity: this.o.identity }, 'became leader');
          this.transition = this.transition.then(() => this.o.onStartedLeading());
        }
      } else if (this.leading) {
        this.lose('another holder has the lease');
      }
    } catch (err) {
      if (this.stopped) return;
      this.o.logger.warn({ err: (err as Error).message }, 'lease update failed');
      if (this.leading && (attempt.signal.aborted || Date.now() - this.lastRenew >= this.o.renewDeadlineMs))
        this.lose('renew deadline exceeded');
    } finally {
      clearTimeout(timer);
      attempt.abort(); // settles the deadline promise; a no-op once the attempt is done
      if (this.attempt === attempt) this.attempt = undefined;
    }
    this.schedule();
  }

  private lose(reason: string): void {
    this.leading = false;
    this.o.logger.warn({ reason }, 'lost leadership');
    this.transition = this.transition.then(() => this.o.onStoppedLeading());
  }

  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const { client, namespace, name, identity } = this.o;
    const now = new Date();
    const leaseDurationSeconds = Math.ceil(this.o.leaseDurationMs / 1000);
    const lease = await client.get<Lease>(RESOURCES.lease, namespace, name, { signal });
    if (!lease) {
      try {
        await client.create(
          RESOURCES.lease,
          {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name, namespace, ...this.ownedBy() },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds,
              acquireTime: microTime(now),
              renewTime: microTime(now),
              leaseTransitions: 0,
            },
          } as Lease,
          { signal },
        );
        return true;
      } catch (err) {
        if (isConflict(err)) return false; // someone created it first
        throw err;
      }
    }
    const spec = lease.spec ?? {};
    const rv = lease.metadata.resourceVersion ?? '';
    if (!this.observed || this.observed.rv !== rv)
      this.observed = { rv, holder: spec.holderIdentity, at: Date.now() };
    const holder = spec.holderIdentity;
    const heldByUs = holder === identity;
    const expired =
      !holder || Date.now() - this.observed.at > (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000;
    if (!heldByUs && !expired) return false;
    const next: Lease = {
      ...lease,
      metadata: { ...lease.metadata, ...this.ownedBy() },
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds,
        renewTime: microTime(now),
        acquireTime: heldByUs ? spec.acquireTime : microTime(now),
        leaseTransitions: heldByUs ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? 0) + 1,
      },
    };
    try {
      const updated = await client.replace<Lease>(RESOURCES.lease, next, { signal });
      this.observed = { rv: updated.metadata.resourceVersion ?? '', holder: identity, at: Date.now() };
      return true;
    } catch (err) {
      if (isConflict(err)) return false; // lost the race; look again next period
      throw err;
    }
  }

  private ownedBy(): { ownerReferences?: Array<NonNullable<LeaderElectionOptions['owner']>> } {
    return this.o.owner ? { ownerReferences: [this.o.owner] } : {};
  }

  private async release(signal: AbortSignal): Promise<void> {
    const { client, namespace, name, identity } = this.o;
    const lease = await client.get<Lease>(RESOURCES.lease, namespace, name, { signal });
    if (!lease || lease.spec?.holderIdentity !== identity) return;
    await client.replace(
      RESOURCES.lease,
      {
        ...lease,
        spec: {
          ...lease.spec,
          holderIdentity: null,
          leaseDurationSeconds: 1,
          renewTime: microTime(new Date()),
        },
      } as Lease,
      { signal },
    );
  }
}
