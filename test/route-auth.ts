// The security check of every route's tests (one file per route): a request without the right
// credential, or with the other kind in its place, is refused with 401 before the route runs.
import { expect } from '@jest/globals';
import { TEST_ADMIN_TOKEN } from './fixtures.ts';
import { call, type ApiFixture, type CallOptions } from './api.ts';

async function expectRefused(
  fx: ApiFixture,
  path: string,
  method: string,
  body: unknown,
  credentials: CallOptions[],
  error: string,
): Promise<void> {
  for (const given of credentials) {
    const res = await call(fx.api.url, path, { method, ...(body === undefined ? {} : { body }), ...given });
    expect(res).toMatchObject({ status: 401, body: { success: false, error } });
  }
}

/**
 * Asserts that `method path` (under /admin/v1) is refused with 401 without the admin token, with
 * `customerKey` (a customer's API key) as the bearer token, and with a wrong token.
 */
export async function expectAdminOnly(
  fx: ApiFixture,
  customerKey: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<void> {
  const credentials: CallOptions[] = [{}, { key: customerKey, bearer: true }, { admin: 'not-the-token' }];
  await expectRefused(fx, `/admin/v1${path}`, method, body, credentials, 'Invalid admin token');
}

/**
 * Asserts that `method path` (under /api/v1) is refused with 401 without an API key, with a key
 * that does not exist, and with the admin token in the key's place.
 */
export async function expectApiKeyOnly(
  fx: ApiFixture,
  method: string,
  path: string,
  body?: unknown,
): Promise<void> {
  const unknownKey = 'svc_live_' + '0'.repeat(48);
  const credentials: CallOptions[] = [{}, { key: unknownKey }, { key: TEST_ADMIN_TOKEN, bearer: true }];
  await expectRefused(fx, `/api/v1${path}`, method, body, credentials, 'Invalid API key');
}
