// Test support for the sub-user route tests (one file per route, api/src/modules/sub-users/routes/):
// the customer's calls, a fresh name, and a product without limit or use.
import type { ApiFixture, CallResult } from './api.ts';
import { call } from './api.ts';

export interface SubUserClient {
  create: (key: string, body: unknown) => Promise<CallResult>;
  patch: (key: string, id: string, body: unknown) => Promise<CallResult>;
}

/** The customer's client of the fixture's sub-users; read `fx` only when called (inside tests). */
export function subUserClient(fx: ApiFixture): SubUserClient {
  return {
    create: (key, body) => call(fx.api.url, '/api/v1/sub-users', { key, body }),
    patch: (key, id, body) => call(fx.api.url, `/api/v1/sub-users/${id}`, { key, body, method: 'PATCH' }),
  };
}

/** A name no other test uses (for a proxy username). */
export const unique = () => `n${Math.random().toString(36).slice(2, 10)}`;

/** A product of a sub-user with no limit and no use. */
export const noLimit = { limitGb: null, limitBytes: null, usedBytes: 0, usedGb: 0, requests: 0 };
