// Counts on the dashboard's pages agree with their number: with a limit of one, the Sub-users page
// says "At most 1 sub-user." and the Proxies page "1 entry", not "1 sub-users" and "1 entries".
// Read by a plain HTTP client after a real sign-in (the words, not the layout, are tested).
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { signedOutForm, postForm, STRONG } from '#test/dashboard.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { hashPassword } from './passwords.ts';
import { createPasswordLink, hashToken } from '#api/modules/password-links/service.ts';
import { setPasswordWithToken } from '#api/modules/password-links/repo.ts';

let db: TestDatabase;
let api: TestApi;
let session: string;

beforeAll(async () => {
  db = await createTestDatabase();
  api = await startTestApi(db, {
    env: { PROXYFLEET_SUB_USERS_MAX: '1', PROXYFLEET_IP_ALLOWLIST_MAX: '1' },
  });
  const owner = await accountWithBandwidth(db.pool, { basic: 10 ** 9 });
  const { url } = await createPasswordLink(db.pool, owner.id, 'invite', 'http://x');
  const token = new URL(url).searchParams.get('token')!;
  await setPasswordWithToken(db.pool, hashToken(token), await hashPassword(STRONG));
  const { cookie, csrf } = await signedOutForm(api.url);
  const res = await postForm(
    api.url,
    '/sign-in',
    { _csrf: csrf, email: owner.email, password: STRONG },
    cookie,
  );
  expect(res.status).toBe(303);
  session = res.headers
    .getSetCookie()
    .find((c) => c.startsWith('pf_session='))!
    .split(';')[0]!;
}, 60_000);
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

const page = async (path: string) =>
  (await (await fetch(api.url + path, { headers: { cookie: session } })).text()).replace(/\s+/g, ' ');

test('Sub-users: "At most 1 sub-user."', async () => {
  expect(await page('/sub-users')).toContain('At most 1 sub-user.');
});

test('Proxies: the allowlist limit "1 entry"', async () => {
  const text = await page('/proxies');
  expect(text).toContain('1 entry;');
  expect(text).not.toContain('1 entries');
});
