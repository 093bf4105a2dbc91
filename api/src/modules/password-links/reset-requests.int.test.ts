// "Forgot password?" does the same work whether or not the email exists (docs/security.md,
// "Forgot password"): with the job held, the request's SQL statements are the same for a known
// and an unknown email and none of them reads accounts; no link exists until the job runs, and
// then only for the known account. A test of the work done, not of the time taken.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { postForm, signedOutForm, STRONG } from '#test/dashboard.ts';
import { createPasswordLink } from './service.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, exampleEmail } from '#test/fixtures.ts';

let db: TestDatabase;
let api: TestApi;
const statements: string[] = [];
let recording = false;

beforeAll(async () => {
  db = await createTestDatabase();
  // Every statement the API sends through its pool, while recording.
  const query = db.pool.query.bind(db.pool) as (...args: unknown[]) => unknown;
  db.pool.query = ((...args: unknown[]) => {
    if (recording) {
      const first = args[0];
      statements.push(typeof first === 'string' ? first : String((first as { text?: string }).text));
    }
    return query(...args);
  }) as typeof db.pool.query;
  const connect = db.pool.connect.bind(db.pool) as (...args: unknown[]) => unknown;
  db.pool.connect = ((...args: unknown[]) => {
    if (recording) statements.push('<connect>');
    return connect(...args);
  }) as typeof db.pool.connect;
  api = await startTestApi(db);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

/** The statements one "Forgot password?" post sends before its answer arrives, the job held. */
async function workOf(email: string): Promise<string[]> {
  const { cookie, csrf } = await signedOutForm(api.url);
  statements.length = 0;
  recording = true;
  const res = await postForm(api.url, '/forgot-password', { _csrf: csrf, email }, cookie);
  const text = await res.text();
  recording = false;
  expect(res.status).toBe(200);
  expect(text).toContain('If an account exists for that email');
  return [...statements];
}

const audit = async (accountId: string) =>
  (
    await db.pool.query(
      `SELECT action, actor_kind, actor_id, host(actor_ip) AS actor_ip, target_type, details
         FROM audit_log WHERE account_id = $1 AND action LIKE 'password.%' ORDER BY id`,
      [accountId],
    )
  ).rows;

const links = async (accountId: string) =>
  (
    await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM dashboard_tokens WHERE account_id = $1 AND purpose = 'reset'`,
      [accountId],
    )
  ).rows[0]!.n;

describe('"Forgot password?"', () => {
  it('does the same work for a known and an unknown email, and looks nothing up before answering', async () => {
    const account = await accountWithBandwidth(db.pool);
    api.api.resetRequests.pause();
    const known = await workOf(account.email);
    const unknown = await workOf(exampleEmail('nobody'));
    expect(known).toEqual(unknown);
    expect(known.length).toBeGreaterThan(0);
    expect(known.filter((sql) => /\baccounts\b|dashboard_tokens|email_enqueue/.test(sql))).toEqual([]);
    expect(await links(account.id)).toBe(0);

    api.api.resetRequests.resume();
    await api.api.resetRequests.idle();
    expect(await links(account.id)).toBe(1);
    const { rows } = await db.pool.query<{ kind: string }>(
      `SELECT kind FROM email_outbox WHERE account_id = $1`,
      [account.id],
    );
    expect(rows.map((r) => r.kind)).toContain('dashboard_reset');
    // The audit entry: written by the job with the link, for the account only.
    expect(await audit(account.id)).toEqual([
      {
        action: 'password.reset_requested',
        actor_kind: 'dashboard',
        actor_id: account.email,
        actor_ip: '127.0.0.1',
        target_type: 'account',
        details: { expiresAt: expect.any(String) },
      },
    ]);
  });

  it('records password.set with the address that used the link, and nothing secret', async () => {
    const account = await accountWithBandwidth(db.pool);
    const { url } = await createPasswordLink(db.pool, account.id, 'reset', 'http://x');
    const token = new URL(url).searchParams.get('token')!;
    const { cookie, csrf } = await signedOutForm(api.url);
    const res = await postForm(api.url, '/set-password', { _csrf: csrf, token, password: STRONG }, cookie);
    expect(res.status).toBe(303);
    const entries = await audit(account.id);
    expect(entries).toEqual([
      {
        action: 'password.set',
        actor_kind: 'dashboard',
        actor_id: account.email,
        actor_ip: '127.0.0.1',
        target_type: 'account',
        details: { link: 'reset' },
      },
    ]);
    expect(JSON.stringify(entries)).not.toContain(token);
    expect(JSON.stringify(entries)).not.toContain(STRONG);
  });

  it('mails no one for an unknown email', async () => {
    const before = await db.pool.query(`SELECT 1 FROM email_outbox WHERE kind = 'dashboard_reset'`);
    await workOf(exampleEmail('nobody-else'));
    await api.api.resetRequests.idle();
    const after = await db.pool.query(`SELECT 1 FROM email_outbox WHERE kind = 'dashboard_reset'`);
    expect(after.rowCount).toBe(before.rowCount);
    const asked = await db.pool.query(`SELECT 1 FROM audit_log WHERE action = 'password.reset_requested'`);
    expect(asked.rowCount).toBe(1); // the known account's, above
  });
});
