// The sign-in throttles under a burst (docs/security.md, "Throttles"): N requests written but their
// last byte, then released together over real sockets (test/burst.ts), against the real API and
// database. Each throttle checks at most its documented number of attempts; scrypt work past its
// queue is refused with a 503 in the API's error format, with Retry-After.
import { afterAll, beforeAll, beforeEach, expect, it, jest } from '@jest/globals';
import { describe } from '@jest/globals';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import { burst, rawFormPost, statusCounts } from '#test/burst.ts';
import { adminCall, postForm, signedOutForm, STRONG, waitingForCode } from '#test/dashboard.ts';
import { createTestDatabase, createTestPool, type TestDatabase } from '#test/db.ts';
import { exampleEmail } from '#test/fixtures.ts';
import { freshCode, twoFactorOn } from '#test/totp.ts';
import { hashPassword } from './passwords.ts';
import { FORGOT_PER_EMAIL, LOGIN_FAILURES_PER_ADDRESS, LOGIN_FAILURES_PER_EMAIL } from './sign-in-rules.ts';

// scrypt on a shared 2-core machine: generous limits; nothing here measures speed.
jest.setTimeout(180_000);

let db: TestDatabase;
let api: TestApi;
let port: number;
let account: { id: string; email: string };
const N = 30;

const from = (n: number) => ({ 'x-forwarded-for': `198.51.100.${n}` });
const cookieOf = (res: Response, name: string) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))!
    .split(';')[0]!;

/** A new account with STRONG as its dashboard password. */
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

/**
 * A pool of one on the test database by the name `localhost`: opening its connection needs libuv's
 * thread pool (the name's lookup), where scrypt runs, as a new connection to `npm start`'s embedded
 * database does (SCRAM's PBKDF2 runs there too; the test server trusts and asks for none).
 */
function poolByName() {
  const url = new URL(db.url);
  if (url.hostname === '127.0.0.1') url.hostname = 'localhost';
  return createTestPool(url.toString(), 'proxyfleet-test-by-name', 1);
}

describe('dashboard throttles under a burst of requests released at once', () => {
  beforeAll(async () => {
    db = await createTestDatabase();
    api = await startTestApi(db, { env: { PROXYFLEET_API_TRUST_PROXY_HOPS: '1' } });
    port = Number(new URL(api.url).port);
    account = await newAccount('burst');
  }, 60_000);

  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  beforeEach(async () => {
    await db.pool.query('DELETE FROM dashboard_login_failures');
  });

  it(`password: ${N} guesses for one email from one address, the right one last: at most ${LOGIN_FAILURES_PER_EMAIL} checked`, async () => {
    const form = await signedOutForm(api.url);
    const requests = Array.from({ length: N }, (_, i) =>
      rawFormPost(
        '/sign-in',
        { _csrf: form.csrf, email: account.email, password: i === N - 1 ? STRONG : `wrong guess ${i}` },
        form.cookie,
        from(1),
      ),
    );
    const counts = statusCounts(await burst(port, requests));
    const checked = (counts[401] ?? 0) + (counts[303] ?? 0);
    expect(checked).toBeLessThanOrEqual(LOGIN_FAILURES_PER_EMAIL);
    expect((counts[429] ?? 0) + checked).toBe(N);
  });

  it(`two-factor code: ${N} wrong codes after the right password: at most ${LOGIN_FAILURES_PER_EMAIL} checked`, async () => {
    const other = await newAccount('burst-code');
    await twoFactorOn(db.pool, other.id);
    const waiting = await waitingForCode(api.url, other.email);
    const requests = Array.from({ length: N }, (_, i) =>
      rawFormPost(
        '/sign-in/code',
        { _csrf: waiting.csrf, code: String(100000 + i) },
        waiting.cookie,
        from(2),
      ),
    );
    const counts = statusCounts(await burst(port, requests));
    expect(counts[401] ?? 0).toBeLessThanOrEqual(LOGIN_FAILURES_PER_EMAIL);
    expect((counts[429] ?? 0) + (counts[401] ?? 0)).toBe(N);
  });

  it(`turning two-factor off: ${N} wrong codes from a session: at most ${LOGIN_FAILURES_PER_EMAIL} checked`, async () => {
    const other = await newAccount('burst-off');
    const secret = await twoFactorOn(db.pool, other.id);
    const waiting = await waitingForCode(api.url, other.email);
    const signedIn = await postForm(
      api.url,
      '/sign-in/code',
      { _csrf: waiting.csrf, code: await freshCode(db.pool, other.id, secret) },
      waiting.cookie,
    );
    expect(signedIn.status).toBe(303);
    const session = cookieOf(signedIn, 'pf_session');
    const page = await fetch(`${api.url}/security`, { headers: { cookie: session } });
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!;
    const requests = Array.from({ length: N }, (_, i) =>
      rawFormPost(
        '/security/two-factor/disable',
        { _csrf: csrf, password: STRONG, code: String(200000 + i) },
        session,
        from(3),
      ),
    );
    const counts = statusCounts(await burst(port, requests));
    expect(counts[422] ?? 0).toBeLessThanOrEqual(LOGIN_FAILURES_PER_EMAIL);
    expect((counts[429] ?? 0) + (counts[422] ?? 0)).toBe(N);
  });

  it(`forgot password: ${N * 2} asks from one address: at most ${LOGIN_FAILURES_PER_ADDRESS} accepted`, async () => {
    const form = await signedOutForm(api.url);
    const requests = Array.from({ length: N * 2 }, (_, i) =>
      rawFormPost(
        '/forgot-password',
        { _csrf: form.csrf, email: exampleEmail(`nobody-${i}`) },
        form.cookie,
        from(4),
      ),
    );
    const counts = statusCounts(await burst(port, requests));
    expect(counts[200] ?? 0).toBeLessThanOrEqual(LOGIN_FAILURES_PER_ADDRESS);
    expect((counts[429] ?? 0) + (counts[200] ?? 0)).toBe(N * 2);
  });

  it(`forgot password: ${N} asks for one email from ${N} addresses: at most ${FORGOT_PER_EMAIL} emails`, async () => {
    const form = await signedOutForm(api.url);
    const requests = Array.from({ length: N }, (_, i) =>
      rawFormPost('/forgot-password', { _csrf: form.csrf, email: account.email }, form.cookie, from(100 + i)),
    );
    const counts = statusCounts(await burst(port, requests));
    expect(counts[200] ?? 0).toBeLessThanOrEqual(FORGOT_PER_EMAIL);
    expect((counts[429] ?? 0) + (counts[200] ?? 0)).toBe(N);
    await api.api.resetRequests.idle();
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM email_outbox WHERE account_id = $1 AND kind = 'dashboard_reset'`,
      [account.id],
    );
    expect(rows[0]!.n).toBeGreaterThan(0);
    expect(rows[0]!.n).toBeLessThanOrEqual(FORGOT_PER_EMAIL);
  });

  it(`set-password links: ${N} unknown links from one address: at most ${LOGIN_FAILURES_PER_ADDRESS} looked up`, async () => {
    const form = await signedOutForm(api.url);
    const requests = Array.from({ length: N }, (_, i) =>
      rawFormPost(
        '/set-password',
        { _csrf: form.csrf, token: `not-a-link-${i}`, password: STRONG },
        form.cookie,
        from(5),
      ),
    );
    const counts = statusCounts(await burst(port, requests));
    expect(counts[410] ?? 0).toBeLessThanOrEqual(LOGIN_FAILURES_PER_ADDRESS);
    expect((counts[429] ?? 0) + (counts[410] ?? 0)).toBe(N);
  });

  it('scrypt work is bounded: a burst of sign-ins from many addresses gets 503s with Retry-After, in the API format', async () => {
    const form = await signedOutForm(api.url);
    const M = 120;
    const requests = Array.from({ length: M }, (_, i) =>
      rawFormPost(
        '/sign-in',
        { _csrf: form.csrf, email: exampleEmail(`many-${i}`), password: 'a guess' },
        form.cookie,
        { 'x-forwarded-for': `203.0.113.${i}`, accept: 'text/html' },
      ),
    );
    const answers = await burst(port, requests);
    const counts = statusCounts(answers);
    expect((counts[401] ?? 0) + (counts[503] ?? 0)).toBe(M);
    expect(counts[503] ?? 0).toBeGreaterThan(0);
    const busy = answers.find((a) => a.status === 503)!;
    expect(Number(busy.headers['retry-after'])).toBeGreaterThan(0);
    expect(JSON.parse(busy.body)).toEqual({ success: false, error: expect.any(String) });
    // The refused attempts were not counted against anyone.
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM dashboard_login_failures WHERE bucket LIKE 'ip:203.0.113.%'`,
    );
    expect(rows[0]!.n).toBe(counts[401]);
  });

  // Before the bounded queue, 400 sign-ins queued 400 hashes in libuv's four threads for minutes on
  // this machine: a new database connection (a worker's, under `npm start`) waited behind them and
  // failed with pg's connection timeout. Now 2 hash, 32 wait, and the rest are answered 503 at once.
  it('scrypt work cannot starve the database: during 400 sign-ins at once, a new connection and an API request are answered', async () => {
    const created = await adminCall(api, '/accounts', { body: { email: exampleEmail('probe') } });
    const key = (created.body as { apiKey: string }).apiKey;
    const form = await signedOutForm(api.url);
    const M = 400;
    const requests = Array.from({ length: M }, (_, i) =>
      rawFormPost(
        '/sign-in',
        { _csrf: form.csrf, email: exampleEmail(`stampede-${i}`), password: 'a guess' },
        form.cookie,
        { 'x-forwarded-for': `10.9.${i >> 8}.${i & 255}`, accept: 'text/html' },
      ),
    );
    const byName = poolByName();
    let running = true;
    let probed: Promise<unknown> | undefined;
    try {
      // Once one sign-in is answered the others are in the server's hands (hashing or queued).
      const answers = await burst(port, requests, () => {
        probed = Promise.all([
          byName.query<{ one: number }>('SELECT 1 AS one').then(
            (r) => r.rows[0]!.one,
            (err: Error) => err.message,
          ),
          call(api.url, '/api/v1/account', { key }).then(
            (r) => r.status,
            (err: Error) => err.message,
          ),
        ]).then(([one, status]) => ({ one, status, duringBurst: running }));
      });
      running = false;
      expect(await probed).toEqual({ one: 1, status: 200, duringBurst: true });
      const counts = statusCounts(answers);
      expect((counts[401] ?? 0) + (counts[503] ?? 0)).toBe(M);
    } finally {
      await byName.end();
    }
  }, 300_000);
});
