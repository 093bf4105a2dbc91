// Sessions and two-factor changes as an attacker who holds a session would try them
// (docs/security.md, "Two-factor sign-in and sessions"): a session ended by a suspension stays
// ended after the account is reactivated; turning two-factor on or off asks for the password.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { adminCall, postForm, signedOutForm, STRONG } from '#test/dashboard.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { exampleEmail, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { freshCode } from '#test/totp.ts';
import { TwoFactor } from '../two-factor/service.ts';
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

  it('turning two-factor on asks for the password: a session alone (no or a wrong password) starts nothing', async () => {
    const a = await newAccount('enrol');
    const s = await signedIn(a.email);
    const start = (fields: Record<string, string>) =>
      postForm(api.url, '/security/two-factor/start', { _csrf: s.csrf, ...fields }, s.cookie);
    const pending = async () =>
      (await db.pool.query('SELECT 1 FROM dashboard_two_factor WHERE account_id = $1', [a.id])).rowCount;
    expect((await start({})).status).toBe(422);
    const wrong = await start({ password: 'not the password' });
    expect(wrong.status).toBe(422);
    expect(await wrong.text()).toContain('Password: that is not your password.');
    expect(await pending()).toBe(0);
    expect((await start({ password: STRONG })).status).toBe(303);
    expect(await pending()).toBe(1);
  });

  it('turning two-factor off asks for the password as well as a code', async () => {
    const a = await newAccount('remove');
    const s = await signedIn(a.email);
    const tf = new TwoFactor(db.pool, TEST_CREDENTIALS_KEY);
    const secret = (await tf.start(a.id))!;
    const actor = { kind: 'dashboard' as const, id: a.email, ip: null };
    const codes = (await tf.confirm(a.id, await freshCode(db.pool, a.id, secret), actor))!;
    const disable = (fields: Record<string, string>) =>
      postForm(api.url, '/security/two-factor/disable', { _csrf: s.csrf, ...fields }, s.cookie);
    expect((await disable({ code: codes[0]! })).status).toBe(422);
    expect((await disable({ password: 'not the password', code: codes[1]! })).status).toBe(422);
    expect((await tf.state(a.id)).enabledAt).not.toBeNull();
    expect((await disable({ password: STRONG, code: codes[2]! })).status).toBe(303);
    expect((await tf.state(a.id)).enabledAt).toBeNull();
  });
});
