// "Forgot password?" does the same work whether or not the email exists (docs/security.md,
// "Forgot password"): with the job held, the request's SQL statements are the same for a known
// and an unknown email and none of them reads accounts; no link exists until the job runs, and
// then only for the known account. A test of the work done, not of the time taken.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestApi, type TestApi } from '#test/api.ts';
import { postForm, signedOutForm } from '#test/dashboard.ts';
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
  });

  it('mails no one for an unknown email', async () => {
    const before = await db.pool.query(`SELECT 1 FROM email_outbox WHERE kind = 'dashboard_reset'`);
    await workOf(exampleEmail('nobody-else'));
    await api.api.resetRequests.idle();
    const after = await db.pool.query(`SELECT 1 FROM email_outbox WHERE kind = 'dashboard_reset'`);
    expect(after.rowCount).toBe(before.rowCount);
  });
});
