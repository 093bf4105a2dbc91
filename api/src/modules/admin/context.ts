// What every /admin/v1 route file is given (routes.ts builds it once): the dependencies, and the
// two steps most routes share: answering once every API process applied a change, and refusing
// an account that does not exist.
import type { z } from 'zod';
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import type { RouteResult } from '#api/http/route.ts';
import { accountParams } from '#api/http/schemas.ts';
import type { AccountService } from '#api/modules/account/service.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import { accountExists } from './repo.ts';

export interface AdminDeps {
  pool: Pool;
  credentialsKey: Buffer;
  accounts: AccountService;
  waitForApiCaches: WaitForApiCaches;
  /** Base URL of invite links: configuration only, never a request header (docs/security.md). */
  linkBase: () => string;
}

export interface AdminContext extends AdminDeps {
  /**
   * Answers once every API process applied the change, and says how many did in the
   * Proxyfleet-Cache-Sync header.
   */
  synced(result: RouteResult): Promise<RouteResult>;
  /** Refuses an account id that names no account (ACCOUNT_NOT_FOUND). */
  mustExist(id: string): Promise<void>;
}

export type IdParams = z.infer<typeof accountParams>;

/** The params of a route on one account, /accounts/:id/...; a malformed id is an unknown account. */
export const oneAccount = { params: accountParams, paramsError: 'ACCOUNT_NOT_FOUND' as const };

export function adminContext(deps: AdminDeps): AdminContext {
  return {
    ...deps,
    async synced(result) {
      const sync = await deps.waitForApiCaches();
      return {
        ...result,
        headers: { ...result.headers, 'Proxyfleet-Cache-Sync': `${sync.synced}/${sync.total}` },
      };
    },
    async mustExist(id) {
      if (!(await accountExists(deps.pool, id))) throw new AppError('ACCOUNT_NOT_FOUND');
    },
  };
}
