// Test support for the /admin/v1 route tests (one file per route, api/src/modules/admin/routes/):
// calls with the admin token and an account made through the API.
import { expect } from '@jest/globals';
import { exampleEmail, TEST_ADMIN_TOKEN } from './fixtures.ts';
import { call, type ApiFixture, type CallOptions, type CallResult } from './api.ts';

export interface AdminAccount {
  id: string;
  email: string;
  status: string;
  apiKey: string;
  proxyUsername: string;
  proxyPassword: string;
}

export interface AdminClient {
  /** A request to /admin/v1`path` with the admin token. */
  admin: (path: string, options?: CallOptions) => Promise<CallResult>;
  /** A new account, made with POST /admin/v1/accounts. */
  newAccount: () => Promise<AdminAccount>;
}

/** The operator's client of the fixture's API; read `fx` only when called (inside tests). */
export function adminClient(fx: ApiFixture): AdminClient {
  const admin = (path: string, options: CallOptions = {}) =>
    call(fx.api.url, `/admin/v1${path}`, { admin: TEST_ADMIN_TOKEN, ...options });
  return {
    admin,
    async newAccount() {
      const res = await admin('/accounts', { body: { email: exampleEmail() } });
      expect(res.status).toBe(201);
      return res.body as AdminAccount;
    },
  };
}
