// The IP allowlist (docs/adr/0036): source ranges whose requests a product's
// gateways admit without credentials. The customer's routes (/api/v1/ip-allowlist) and the
// operator's (/admin/v1/accounts/:id/ip-allowlist) share the repo and the schemas.
import { z } from 'zod';
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { adminActor, apiKeyActor } from '#api/http/actor.ts';
import { accountParams, uuid } from '#api/http/schemas.ts';
import { addAllowlistEntry, listAllowlist, removeAllowlistEntry } from './repo.ts';
import {
  allowlistCreate,
  allowlistEntrySchema,
  allowlistResponseSchema,
  type AllowlistCreate,
} from './schemas.ts';

export interface AllowlistDeps {
  pool: Pool;
  /** Entries per account, all products together (PROXYFLEET_IP_ALLOWLIST_MAX). */
  limit: number;
  /** Private, loopback and reserved ranges accepted (PROXYFLEET_IP_ALLOWLIST_PRIVATE; dev and tests). */
  allowPrivate: boolean;
}

const DESCRIPTION =
  'Requests from an allowlisted range to the product’s gateways need no credentials; a request that ' +
  'sends credentials is judged by them alone. Gateways apply a change within a second; removing an ' +
  'entry ends the connections it admitted.';
const CREATE_ERRORS = [
  'VALIDATION_FAILED',
  'ALLOWLIST_LIMIT',
  'ALLOWLIST_ENTRY_EXISTS',
  'ALLOWLIST_OVERLAP',
] as const;
const entryParams = z.object({ entryId: uuid });
const adminEntryParams = z.object({ id: uuid, entryId: uuid });

export function allowlistRoutes(deps: AllowlistDeps): RouteDef[] {
  const create = allowlistCreate(deps.allowPrivate);
  return [
    defineRoute({
      method: 'get',
      path: '/ip-allowlist',
      tag: 'ip-allowlist',
      summary: 'The IP allowlist: ranges that use the proxies without credentials',
      description: DESCRIPTION,
      auth: 'apiKey',
      response: okSchema(allowlistResponseSchema),
      handler: async ({ res }) => {
        const entries = await listAllowlist(deps.pool, principal(res).accountId);
        if (!entries) throw new AppError('INVALID_API_KEY');
        return { body: ok({ entries, limit: deps.limit }) };
      },
    }),
    defineRoute<AllowlistCreate>({
      method: 'post',
      path: '/ip-allowlist',
      tag: 'ip-allowlist',
      summary: 'Add an address or range (at most /24 or /48 wide) for one product, with optional targeting',
      description: DESCRIPTION,
      auth: 'apiKey',
      body: create,
      response: okSchema(allowlistEntrySchema),
      status: 201,
      errors: [...CREATE_ERRORS],
      handler: async ({ req, res, body }) => {
        const entry = await addAllowlistEntry(
          deps.pool,
          principal(res).accountId,
          body,
          deps.limit,
          apiKeyActor(req, res),
        ).catch((err: unknown) => {
          throw err instanceof AppError && err.code === 'ACCOUNT_NOT_FOUND'
            ? new AppError('INVALID_API_KEY')
            : err;
        });
        return { status: 201, body: ok(entry) };
      },
    }),
    defineRoute<undefined, z.infer<typeof entryParams>>({
      method: 'delete',
      path: '/ip-allowlist/:entryId',
      tag: 'ip-allowlist',
      summary: 'Remove an entry; connections it admitted end within a second',
      auth: 'apiKey',
      params: entryParams,
      paramsError: 'ALLOWLIST_ENTRY_NOT_FOUND',
      status: 204,
      errors: ['ALLOWLIST_ENTRY_NOT_FOUND'],
      handler: async ({ req, res, params }) => {
        const actor = apiKeyActor(req, res);
        if (!(await removeAllowlistEntry(deps.pool, principal(res).accountId, params.entryId, actor)))
          throw new AppError('ALLOWLIST_ENTRY_NOT_FOUND');
        return { status: 204 };
      },
    }),
  ];
}

export function adminAllowlistRoutes(deps: AllowlistDeps): RouteDef[] {
  const create = allowlistCreate(deps.allowPrivate);
  const account = { params: accountParams, paramsError: 'ACCOUNT_NOT_FOUND' as const };
  return [
    defineRoute<undefined, { id: string }>({
      method: 'get',
      path: '/accounts/:id/ip-allowlist',
      tag: 'admin',
      summary: "An account's IP allowlist",
      auth: 'admin',
      ...account,
      response: allowlistResponseSchema,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params }) => {
        const entries = await listAllowlist(deps.pool, params.id);
        if (!entries) throw new AppError('ACCOUNT_NOT_FOUND');
        return { body: { entries, limit: deps.limit } };
      },
    }),
    defineRoute<AllowlistCreate, { id: string }>({
      method: 'post',
      path: '/accounts/:id/ip-allowlist',
      tag: 'admin',
      summary: "Add an address or range to an account's IP allowlist",
      description: DESCRIPTION,
      auth: 'admin',
      ...account,
      body: create,
      response: allowlistEntrySchema,
      status: 201,
      errors: [...CREATE_ERRORS, 'ACCOUNT_NOT_FOUND'],
      handler: async ({ params, body, req }) => ({
        status: 201,
        body: await addAllowlistEntry(deps.pool, params.id, body, deps.limit, adminActor(req)),
      }),
    }),
    defineRoute<undefined, z.infer<typeof adminEntryParams>>({
      method: 'delete',
      path: '/accounts/:id/ip-allowlist/:entryId',
      tag: 'admin',
      summary: "Remove an entry of an account's IP allowlist",
      auth: 'admin',
      params: adminEntryParams,
      paramsError: 'ALLOWLIST_ENTRY_NOT_FOUND',
      status: 204,
      errors: ['ALLOWLIST_ENTRY_NOT_FOUND'],
      handler: async ({ params, req }) => {
        if (!(await removeAllowlistEntry(deps.pool, params.id, params.entryId, adminActor(req))))
          throw new AppError('ALLOWLIST_ENTRY_NOT_FOUND');
        return { status: 204 };
      },
    }),
  ];
}
