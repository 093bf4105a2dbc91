// One-time links against the real database and a real SMTP server: the invite email goes out
// through the worker's outbox sender, its body is blanked once sent, a link works once and expires,
// and setting the password ends every session of the account.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { createLogger } from '#common/logger.ts';
import { sha256 } from '#common/secrets.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { emailSenderJob } from '../../../../worker/src/jobs/email.ts';
import { startTestSmtpServer, type TestSmtpServer } from '#test/smtp.ts';
import { createPasswordLink, hashToken } from './service.ts';
import { insertSession } from '#api/modules/dashboard/repo.ts';
import { peekToken, setPasswordWithToken } from './repo.ts';

let db: TestDatabase;
let smtp: TestSmtpServer;

beforeAll(async () => {
  db = await createTestDatabase();
  smtp = await startTestSmtpServer();
});
afterAll(async () => {
  await smtp.close();
  await db.drop();
});

const tokenOf = (url: string) => new URL(url).searchParams.get('token')!;

describe('dashboard one-time links', () => {
  it('emails the invite through the outbox and keeps no readable link once it is sent', async () => {
    const account = await accountWithBandwidth(db.pool);
    const link = await createPasswordLink(db.pool, account.id, 'invite', 'https://dash.example.test/');
    expect(link.url).toMatch(/^https:\/\/dash\.example\.test\/set-password\?token=[A-Za-z0-9_-]{43}$/);
    const job = emailSenderJob({
      smtpUrl: smtp.url,
      from: 'proxyfleet <alerts@example.test>',
      logger: createLogger('test', 'silent'),
      registry: new Registry(),
    });
    await job.run({ pool: db.pool, logger: createLogger('test', 'silent') });
    const mail = smtp.messages.find((m) => m.text?.includes(link.url));
    expect(mail?.subject).toBe('Your proxyfleet dashboard: set your password');
    const { rows } = await db.pool.query<{ status: string; body_text: string }>(
      `SELECT status, body_text FROM email_outbox WHERE account_id = $1 AND kind = 'dashboard_invite'`,
      [account.id],
    );
    expect(rows).toEqual([{ status: 'sent', body_text: '[sent; the one-time link it carried is not kept]' }]);
    // The token itself is nowhere in the database, only its hash.
    const stored = await db.pool.query(`SELECT 1 FROM dashboard_tokens WHERE token_hash = $1`, [
      sha256(tokenOf(link.url)),
    ]);
    expect(stored.rowCount).toBe(1);
  });

  it('works once, voids the other open links, ends every session, and expires', async () => {
    const account = await accountWithBandwidth(db.pool);
    const first = tokenOf((await createPasswordLink(db.pool, account.id, 'invite', 'http://x')).url);
    const second = tokenOf((await createPasswordLink(db.pool, account.id, 'reset', 'http://x')).url);
    await insertSession(db.pool, { hash: sha256('a session'), accountId: account.id, absoluteSeconds: 3600 });
    await expect(peekToken(db.pool, hashToken(first))).resolves.toMatchObject({ accountId: account.id });
    await expect(setPasswordWithToken(db.pool, hashToken(first), 'scrypt$1$1$1$a$b')).resolves.toBe(
      account.id,
    );
    await expect(
      setPasswordWithToken(db.pool, hashToken(first), 'scrypt$1$1$1$a$c'),
    ).resolves.toBeUndefined();
    await expect(peekToken(db.pool, hashToken(second))).resolves.toBeUndefined();
    const sessions = await db.pool.query('SELECT 1 FROM dashboard_sessions WHERE account_id = $1', [
      account.id,
    ]);
    expect(sessions.rowCount).toBe(0);

    const third = tokenOf((await createPasswordLink(db.pool, account.id, 'reset', 'http://x')).url);
    await db.pool.query(
      `UPDATE dashboard_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1`,
      [hashToken(third)],
    );
    await expect(peekToken(db.pool, hashToken(third))).resolves.toBeUndefined();
    await expect(
      setPasswordWithToken(db.pool, hashToken(third), 'scrypt$1$1$1$a$d'),
    ).resolves.toBeUndefined();
  });
});
