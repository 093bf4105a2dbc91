// Who made a change, for the audit log (docs/security.md "Audit log", docs/adr/0079): the caller
// of a route as recordAudit (#common/audit/record.ts) names it. The address is Express's req.ip
// (behind as many reverse proxies as PROXYFLEET_TRUST_PROXY_HOPS says, never a header otherwise).
import type { Request, Response } from 'express';
import type { AuditActor } from '#common/audit/record.ts';

/**
 * The admin API has one shared bearer token and no operator accounts, so every operator is this
 * one actor; what tells two operators apart is the address.
 */
export const ADMIN_ACTOR_ID = 'admin-token';

/** The principal the API key middleware set (res.locals.principal). */
interface KeyPrincipal {
  keyId: string;
}

/** A customer's API key: the key's id (never the key). */
export function apiKeyActor(req: Request, res: Response): AuditActor {
  const p = res.locals.principal as KeyPrincipal | undefined;
  if (!p) throw new Error('an api_key actor needs the API key middleware first');
  return { kind: 'api_key', id: p.keyId, ip: req.ip ?? null };
}

/** An operator through /admin/v1 (or the CLI, which calls it). */
export const adminActor = (req: Request): AuditActor => ({
  kind: 'admin',
  id: ADMIN_ACTOR_ID,
  ip: req.ip ?? null,
});

/** A signed-in person on the dashboard: their email. */
export const dashboardActor = (req: Request, email: string): AuditActor => ({
  kind: 'dashboard',
  id: email,
  ip: req.ip ?? null,
});
