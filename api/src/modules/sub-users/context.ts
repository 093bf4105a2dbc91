// What the sub-user route files (routes/) are given and share: the dependencies, the description
// of a sub-user, the refusals of a creation and a change, and the params of one sub-user, in the
// customer's path (/sub-users/:subUserId) and in the operator's (/accounts/:id/sub-users/:subUserId).
import { z } from 'zod';
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import { uuid } from '#api/http/schemas.ts';

export interface SubUsersDeps {
  pool: Pool;
  credentialsKey: Buffer;
  /** Sub-users per account (PROXYFLEET_SUB_USERS_MAX). */
  limit: number;
}

export const DESCRIPTION =
  "A sub-user's username and password replace the account's in proxy strings (targeting is written " +
  "the same way). Its traffic is the account's (billed from the account's balance); a limit per " +
  'product caps what the sub-user may use over its lifetime. Gateways apply a change within a second.';
export const CREATE_ERRORS = [
  'VALIDATION_FAILED',
  'SUB_USER_LIMIT',
  'SUB_USER_NAME_TAKEN',
  'PROXY_USERNAME_TAKEN',
] as const;
export const UPDATE_ERRORS = [
  'VALIDATION_FAILED',
  'SUB_USER_NOT_FOUND',
  'SUB_USER_NAME_TAKEN',
  'PROXY_USERNAME_TAKEN',
] as const;

const subUserParams = z.object({ subUserId: uuid });
const accountSubUserParams = z.object({ id: uuid, subUserId: uuid });
export type SubUserParams = z.infer<typeof subUserParams>;
export type AccountSubUserParams = z.infer<typeof accountSubUserParams>;
/** The customer's path to one sub-user; a malformed id is an unknown sub-user. */
export const oneSubUser = { params: subUserParams, paramsError: 'SUB_USER_NOT_FOUND' as const };
/** The operator's path to one sub-user of one account. */
export const accountSubUser = { params: accountSubUserParams, paramsError: 'SUB_USER_NOT_FOUND' as const };

/** The account behind the key was deleted between authentication and the query. */
export const keyGone = (err: unknown) => {
  throw err instanceof AppError && err.code === 'ACCOUNT_NOT_FOUND' ? new AppError('INVALID_API_KEY') : err;
};
