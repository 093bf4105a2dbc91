// Sticky sessions without pod memory (docs/adr/0022): the first request of a session, on any pod,
// records when it started in sticky_sessions (one upsert; a session whose lifetime ran out starts
// again). Every pod then derives the same exit from (key, start) by rendezvous hashing, for the
// session's lifetime. Pods cache the start until expiry. If the database is unreachable, the
// start falls back to the current lifetime-aligned window, which every pod computes the same way.
import { createHash } from 'node:crypto';
import type { Pool } from '#common/db/pool.ts';
import type { Targeting } from '#common/credentials.ts';

const CACHE_LIMIT = 100_000;

export interface SessionKeyParts {
  accountId: string;
  plan: string;
  sessionId: string;
  targeting: Targeting;
}

export class SessionStore {
  private readonly cache = new Map<string, { seed: string; expiresAt: number }>();
  private readonly pool: Pool;

  constructor(pool: Pool) {
    this.pool = pool;
  }

  /** The seed for rendezvous hashing of this session: stable for its lifetime on every pod. */
  async seed(parts: SessionKeyParts, minutes: number): Promise<string> {
    const t = parts.targeting;
    const key = createHash('sha256')
      .update(
        [parts.accountId, parts.plan, parts.sessionId, t.country ?? '', t.state ?? '', t.city ?? ''].join(
          '\0',
        ),
      )
      .digest();
    const hex = key.toString('hex');
    const now = Date.now();
    const hit = this.cache.get(hex);
    if (hit && hit.expiresAt > now) return hit.seed;
    let startedAt: number;
    let expiresAt: number;
    try {
      const { rows } = await this.pool.query<{ started_at: Date; expires_at: Date }>(
        `INSERT INTO sticky_sessions (key, expires_at) VALUES ($1, now() + make_interval(mins => $2))
         ON CONFLICT (key) DO UPDATE SET
           started_at = CASE WHEN sticky_sessions.expires_at <= now() THEN now() ELSE sticky_sessions.started_at END,
           expires_at = CASE WHEN sticky_sessions.expires_at <= now() THEN EXCLUDED.expires_at ELSE sticky_sessions.expires_at END
         RETURNING started_at, expires_at`,
        [key, minutes],
      );
      startedAt = rows[0]!.started_at.getTime();
      expiresAt = rows[0]!.expires_at.getTime();
    } catch {
      const windowMs = minutes * 60_000;
      startedAt = Math.floor(now / windowMs) * windowMs;
      expiresAt = startedAt + windowMs;
    }
    const seed = `${hex}:${startedAt}`;
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(hex, { seed, expiresAt });
    return seed;
  }
}
