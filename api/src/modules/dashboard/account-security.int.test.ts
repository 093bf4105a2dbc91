// Sessions and two-factor changes as an attacker who holds a session would try them
// (docs/security.md, "Two-factor sign-in and sessions"): a session ended by a suspension stays
// ended after the account is reactivated; turning two-factor on or off asks for the password.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { adminCall, postForm, signedOutForm, STRONG } from '#test/dashboard.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { exampleEmail, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { freshCode } from '#test/totp.ts';
import { renderEmail } from '../../../../worker/src/jobs/render.ts';
import { TwoFactor } from '#api/modules/two-factor/service.ts';
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

const cookieOf = (res: Response, name: string) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))!
    .split(';')[0]!;

/**
 * Signs in with the password (two-factor off), from the browser whose `pf_browser` cookie is given
 * (else a new one): the session cookie, the Security page's CSRF token and the browser cookie.
 */
async function signedIn(
  email: string,
  browser = '',
  userAgent = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0',
): Promise<{ cookie: string; csrf: string; browser: string }> {
  const form = await signedOutForm(api.url);
  const cookies = [form.cookie, ...(browser ? [browser] : [])].join('; ');
  const fields = { _csrf: form.csrf, email, password: STRONG };
  const res = await postForm(api.url, '/sign-in', fields, cookies, { 'user-agent': userAgent });
  expect(res.status).toBe(303);
  const cookie = cookieOf(res, 'pf_session');
  const page = await fetch(`${api.url}/security`, { headers: { cookie }, redirect: 'manual' });
  expect(page.status).toBe(200);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  return { cookie, csrf, browser: cookieOf(res, 'pf_browser') };
}

async function securityNotices(
  accountId: string,
): Promise<{ to_address: string; payload: { event: string; [k: string]: unknown } }[]> {
  const { rows } = await db.pool.query<{ to_address: string; payload: { event: string } }>(
    `SELECT to_address, payload FROM email_outbox WHERE account_id = $1 AND kind = 'security_notice' ORDER BY id`,
    [accountId],
  );
  return rows;
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

  it('every two-factor change is emailed to the owner: on, off, and an operator reset (not a reset while off)', async () => {
    const a = await newAccount('notices');
    const tf = new TwoFactor(db.pool, TEST_CREDENTIALS_KEY);
    const actor = { kind: 'dashboard' as const, id: a.email, ip: '::ffff:198.51.100.9' };
    const on = async () => {
      const secret = (await tf.start(a.id))!;
      return (await tf.confirm(a.id, await freshCode(db.pool, a.id, secret), actor))!;
    };
    const codes = await on();
    expect(await tf.disable(a.id, codes[0]!, actor)).toBe(true);
    await on();
    const reset = () => adminCall(api, `/accounts/${a.id}/two-factor/reset`, { method: 'POST' });
    expect((await reset()).status).toBe(200);
    expect((await reset()).status).toBe(200); // off already: nothing to tell
    const notices = await securityNotices(a.id);
    expect(notices.map((n) => n.payload.event)).toEqual([
      'two_factor_enabled',
      'two_factor_disabled',
      'two_factor_enabled',
      'two_factor_reset',
    ]);
    const first = await renderEmail(db.pool, 'security_notice', a.id, notices[0]!.payload);
    expect(first).toMatchObject({ subject: 'Two-factor authentication turned on' });
    expect((first as { body: string }).body).toContain('From: 198.51.100.9');
    expect(notices.every((n) => n.to_address === a.email)).toBe(true);
  });

  it('a sign-in from a browser new to the account is emailed; the first ever and a known browser are not', async () => {
    const a = await newAccount('browsers');
    const first = await signedIn(a.email);
    expect(await securityNotices(a.id)).toEqual([]);
    await signedIn(a.email, first.browser);
    expect(await securityNotices(a.id)).toEqual([]);
    const chrome =
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36';
    await signedIn(a.email, '', chrome);
    const notices = await securityNotices(a.id);
    expect(notices.map((n) => n.payload)).toEqual([
      expect.objectContaining({
        event: 'new_browser_sign_in',
        browser: 'Chrome 131 on Windows',
        ip: '127.0.0.1',
      }),
    ]);
    const mail = await renderEmail(db.pool, 'security_notice', a.id, notices[0]!.payload);
    expect(mail).toMatchObject({ subject: 'New sign-in to your dashboard' });
    expect((mail as { body: string }).body).toContain('Browser: Chrome 131 on Windows');
  });
});
