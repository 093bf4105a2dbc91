// Two-factor sign-in and sessions over HTTP against the real API and database (docs/adr/0077):
// turning on (the secret sealed, the recovery codes hashed, wrong codes refused with what was
// typed kept), the code step after the password, no replay of a code in its window, recovery
// codes once each, the throttle shared with passwords, turning off, the admin reset, the session
// list with Sign out and Sign out everywhere else, and the audit entries, none with a secret.
import { describe, expect, it } from '@jest/globals';
import { hashPassword } from '#api/modules/dashboard/passwords.ts';
import { adminCall } from '#test/dashboard.ts';
import { useTestApi } from '#test/api.ts';
import { TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { runCli } from '#api/cli/main.ts';
import { freshCode as totpCode } from '#test/totp.ts';
import { hashRecoveryCode, recoveryKeyFrom } from './service.ts';
import { accountWithBandwidth, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { unseal } from '#common/secrets.ts';

const fixture = useTestApi();
const PASSWORD = 'velvet Anchor tiptoe 93 marmalade';

/** A browser as far as the dashboard can tell: a cookie jar, the last page's CSRF token. */
class Browser {
  cookies = new Map<string, string>();
  csrf = '';
  userAgent: string;
  ip: string;
  constructor(userAgent = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0') {
    this.userAgent = userAgent;
    this.ip = '127.0.0.1';
  }
  private keep(res: Response) {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const [name, value] = pair!.split('=');
      if (/Max-Age=0|Expires=Thu, 01 Jan 1970/.test(c)) this.cookies.delete(name!);
      else this.cookies.set(name!, value!);
    }
  }
  private headers(): Record<string, string> {
    return {
      cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      'user-agent': this.userAgent,
    };
  }
  async get(path: string): Promise<{ status: number; text: string; location: string | null }> {
    const res = await fetch(fixture.api.url + path, { redirect: 'manual', headers: this.headers() });
    this.keep(res);
    const text = await res.text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(text);
    if (csrf) this.csrf = csrf[1]!;
    return { status: res.status, text, location: res.headers.get('location') };
  }
  async post(
    path: string,
    fields: Record<string, string> = {},
  ): Promise<{ status: number; text: string; location: string | null }> {
    const res = await fetch(fixture.api.url + path, {
      method: 'POST',
      redirect: 'manual',
      headers: { ...this.headers(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: this.csrf, ...fields }).toString(),
    });
    this.keep(res);
    const text = await res.text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(text);
    if (csrf) this.csrf = csrf[1]!;
    return { status: res.status, text, location: res.headers.get('location') };
  }
  async signIn(email: string, password = PASSWORD) {
    await this.get('/sign-in');
    return this.post('/sign-in', { email, password });
  }
  /** "Sign out" in the header of a signed-in page. */
  async signOut() {
    await this.get('/security');
    expect((await this.post('/sign-out')).location).toBe('/sign-in');
  }
  get signedIn() {
    return this.cookies.has('pf_session');
  }
}

async function accountWithPassword() {
  const account = await accountWithBandwidth(fixture.db.pool);
  // Cheap scrypt parameters: verifyPassword reads them from the stored hash.
  await fixture.db.pool.query(
    'INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, $2)',
    [account.id, await hashPassword(PASSWORD, { N: 2 ** 10, r: 8, p: 1 })],
  );
  return account;
}

const freshCode = (accountId: string, secret: string) => totpCode(fixture.db.pool, accountId, secret);

async function auditActions(
  accountId: string,
): Promise<{ action: string; actor_kind: string; details: object }[]> {
  const { rows } = await fixture.db.pool.query(
    'SELECT action, actor_kind, actor_id, actor_ip, target_type, target_id, details FROM audit_log WHERE account_id = $1 ORDER BY id',
    [accountId],
  );
  return rows;
}

/** Turns two-factor on in `b`: the secret read from the page and the recovery codes shown. */
async function enrol(b: Browser, accountId: string): Promise<{ secret: string; codes: string[] }> {
  await b.get('/security');
  expect((await b.post('/security/two-factor/start', { password: PASSWORD })).location).toBe('/security');
  const page = await b.get('/security');
  const secret = /id="totp-secret">([A-Z2-7 ]+)</.exec(page.text)![1]!.replace(/ /g, '');
  const confirmed = await b.post('/security/two-factor/confirm', {
    code: await freshCode(accountId, secret),
  });
  expect(confirmed.status).toBe(200);
  const codes = [...confirmed.text.matchAll(/<li><code>([a-z2-9-]+)<\/code><\/li>/g)].map((m) => m[1]!);
  return { secret, codes };
}

describe('two-factor sign-in', () => {
  it('turns on: secret as text and an SVG QR code (no script), a wrong code refused with what was typed, then 10 recovery codes once; sealed and hashed at rest', async () => {
    const account = await accountWithPassword();
    const b = new Browser();
    expect((await b.signIn(account.email)).location).toBe('/');
    const off = await b.get('/security');
    expect(off.status).toBe(200);
    expect(off.text).toContain('Turn on two-factor authentication');
    expect(off.text).toContain('<a href="/security"');

    await b.post('/security/two-factor/start', { password: PASSWORD });
    const page = await b.get('/security');
    const secret = /id="totp-secret">([A-Z2-7 ]+)</.exec(page.text)![1]!.replace(/ /g, '');
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    const svg = /<svg[^]*?<\/svg>/.exec(page.text)![0];
    expect(svg).toContain('role="img"');
    expect(svg).not.toMatch(/<script|style=|on[a-z]+=/i);
    expect(page.text).not.toContain('otpauth://'); // the URI is in the QR code only

    const wrong = await b.post('/security/two-factor/confirm', { code: '12345x' });
    expect(wrong.status).toBe(422);
    expect(wrong.text).toContain('Code: that code is not right.');
    expect(wrong.text).toContain('value="12345x"');
    expect(wrong.text).toContain(secret.slice(0, 4)); // still turning on
    const empty = await b.post('/security/two-factor/confirm', { code: '' });
    expect(empty.status).toBe(422);
    expect(empty.text).toContain('Code: enter the code.');

    const ok = await b.post('/security/two-factor/confirm', { code: await freshCode(account.id, secret) });
    expect(ok.status).toBe(200);
    const codes = [...ok.text.matchAll(/<li><code>([a-z2-9-]+)<\/code><\/li>/g)].map((m) => m[1]!);
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    // Shown once: the page after shows that it is on, not the codes.
    const after = await b.get('/security');
    expect(after.text).toContain('Turn off two-factor authentication');
    expect(after.text).toContain('Recovery codes left:\n');
    for (const c of codes) expect(after.text).not.toContain(c);

    const { rows } = await fixture.db.pool.query<{ secret_enc: Buffer }>(
      'SELECT secret_enc FROM dashboard_two_factor WHERE account_id = $1',
      [account.id],
    );
    expect(rows[0]!.secret_enc.toString('latin1')).not.toContain(secret);
    expect(unseal(TEST_CREDENTIALS_KEY, rows[0]!.secret_enc)).toBe(secret);
    const dump = JSON.stringify(
      (
        await fixture.db.pool.query(
          'SELECT encode(code_hash, $2) AS h FROM dashboard_recovery_codes WHERE account_id = $1',
          [account.id, 'escape'],
        )
      ).rows,
    );
    for (const c of codes) expect(dump).not.toContain(c.replace(/-/g, ''));

    const audit = await auditActions(account.id);
    const enabled = audit.filter((a) => a.action === 'two_factor.enabled');
    expect(enabled).toEqual([
      expect.objectContaining({ actor_kind: 'dashboard', details: { recoveryCodesIssued: 10 } }),
    ]);
    const text = JSON.stringify(audit);
    for (const s of [secret, ...codes, PASSWORD]) expect(text).not.toContain(s);
  });

  it('asks for the code after the password; a code cannot be replayed; a recovery code works once; the code step is bound to the browser', async () => {
    const account = await accountWithPassword();
    const b = new Browser();
    await b.signIn(account.email);
    const { secret, codes } = await enrol(b, account.id);
    await b.signOut();

    const c = new Browser();
    const step1 = await c.signIn(account.email);
    expect(step1.location).toBe('/sign-in/code');
    expect(c.signedIn).toBe(false);
    const form = await c.get('/sign-in/code');
    expect(form.status).toBe(200);
    expect(form.text).toContain('<label for="code">Code</label>');
    // Another browser (another pre-session cookie) has no sign-in waiting.
    const other = new Browser();
    await other.get('/sign-in');
    expect((await other.get('/sign-in/code')).location).toBe('/sign-in');

    const code = await freshCode(account.id, secret);
    const signedIn = await c.post('/sign-in/code', { code });
    expect(signedIn.location).toBe('/');
    expect(c.signedIn).toBe(true);
    await c.signOut();

    // The same code again, in its window: refused.
    const d = new Browser();
    await d.signIn(account.email);
    const replay = await d.post('/sign-in/code', { code });
    expect(replay.status).toBe(401);
    expect(replay.text).toContain('that code is not right');
    expect(replay.text).toContain(`value="${code}"`);
    expect(d.signedIn).toBe(false);

    // A recovery code (typed in capitals without dashes), once.
    const recovery = await d.post('/sign-in/code', { code: codes[0]!.replace(/-/g, '').toUpperCase() });
    expect(recovery.location).toBe('/');
    await d.signOut();
    const e = new Browser();
    await e.signIn(account.email);
    expect((await e.post('/sign-in/code', { code: codes[0]! })).status).toBe(401);
    expect((await e.get('/security')).location).toBe('/sign-in');

    // Few codes left: the page says how to get new ones.
    const keep = hashRecoveryCode(recoveryKeyFrom(TEST_CREDENTIALS_KEY), codes[9]!);
    await fixture.db.pool.query(
      `UPDATE dashboard_recovery_codes SET used_at = now() WHERE account_id = $1 AND code_hash IN
         (SELECT code_hash FROM dashboard_recovery_codes WHERE account_id = $1 AND used_at IS NULL AND code_hash <> $2 LIMIT 6)`,
      [account.id, keep],
    );
    await b.signIn(account.email);
    await b.post('/sign-in/code', { code: codes[9]! });
    const few = await b.get('/security');
    expect(few.text).toContain('Only 2 recovery codes left.');

    const audit = await auditActions(account.id);
    expect(audit.filter((a) => a.action === 'session.signed_in').map((a) => a.details)).toEqual([
      { secondFactor: 'none' },
      { secondFactor: 'totp' },
      { secondFactor: 'recovery_code' },
      { secondFactor: 'recovery_code' },
    ]);
    // Both wrong codes came from one address: one entry, counted (docs/security.md "Audit log").
    expect(audit.filter((a) => a.action === 'session.sign_in_failed').map((a) => a.details)).toEqual([
      { reason: 'second_factor', count: 2, lastAt: expect.any(String) },
    ]);
    expect(audit.filter((a) => a.action === 'session.signed_out')).toHaveLength(3);
    const text = JSON.stringify(audit);
    for (const s of [secret, code, ...codes, PASSWORD]) expect(text).not.toContain(s);
  });

  it('one code sent from two browsers at once signs in only one of them', async () => {
    const account = await accountWithPassword();
    const b = new Browser();
    await b.signIn(account.email);
    const { secret } = await enrol(b, account.id);
    for (let round = 0; round < 5; round++) {
      // Each round's code fresh without waiting for the clock: the last used step forgotten.
      await fixture.db.pool.query('UPDATE dashboard_two_factor SET last_step = NULL WHERE account_id = $1', [
        account.id,
      ]);
      await fixture.db.pool.query('DELETE FROM dashboard_login_failures');
      const [c, d] = [new Browser(), new Browser()];
      await c.signIn(account.email);
      await d.signIn(account.email);
      const code = await freshCode(account.id, secret);
      const results = await Promise.all([c, d].map((x) => x.post('/sign-in/code', { code })));
      expect(results.map((r) => r.status).sort()).toEqual([303, 401]);
      expect([c, d].filter((x) => x.signedIn)).toHaveLength(1);
    }
  });

  it('throttles wrong codes with the password failures: after 5 even a right code is refused, and the password alone does not reset the count', async () => {
    const account = await accountWithPassword();
    const b = new Browser();
    await b.signIn(account.email);
    const { codes } = await enrol(b, account.id);
    await b.signOut();

    const c = new Browser();
    await c.signIn(account.email);
    for (let i = 0; i < 5; i++) expect((await c.post('/sign-in/code', { code: '000000' })).status).toBe(401);
    const blocked = await c.post('/sign-in/code', { code: codes[1]! });
    expect(blocked.status).toBe(429);
    expect(blocked.text).toContain('Too many failed sign-in attempts');
    // The right password again leads to the code step, whose count still stands.
    expect((await c.signIn(account.email)).status).toBe(429);
    const d = new Browser();
    expect((await d.signIn(account.email)).status).toBe(429);
    // The recovery code was not spent by the refused attempt.
    await fixture.db.pool.query('DELETE FROM dashboard_login_failures');
    await d.signIn(account.email);
    expect((await d.post('/sign-in/code', { code: codes[1]! })).location).toBe('/');
  });

  it('turns off with a code (a wrong one refused and counted), and an operator can reset it', async () => {
    const account = await accountWithPassword();
    const b = new Browser();
    await b.signIn(account.email);
    const { codes } = await enrol(b, account.id);
    const wrong = await b.post('/security/two-factor/disable', { password: PASSWORD, code: '999999' });
    expect(wrong.status).toBe(422);
    expect(wrong.text).toContain('value="999999"');
    const failures = await fixture.db.pool.query('SELECT 1 FROM dashboard_login_failures WHERE bucket = $1', [
      `email:${account.email.toLowerCase()}`,
    ]);
    expect(failures.rowCount).toBe(1);
    const off = await b.post('/security/two-factor/disable', { password: PASSWORD, code: codes[2]! });
    expect(off.location).toBe('/security?done=off');
    expect((await b.get('/security?done=off')).text).toContain('Two-factor authentication is off.');
    await b.signOut();
    expect((await new Browser().signIn(account.email)).location).toBe('/');

    // On again, then reset by the operator: the password alone signs in.
    await b.signIn(account.email);
    await enrol(b, account.id);
    const reset = await adminCall(fixture.api, `/accounts/${account.id}/two-factor/reset`, {
      method: 'POST',
    });
    expect(reset.status).toBe(200);
    expect(reset.body).toEqual({ accountId: account.id, twoFactorEnabled: false, wasEnabled: true });
    const again = await adminCall(fixture.api, `/accounts/${account.id}/two-factor/reset`, {
      method: 'POST',
    });
    expect(again.body).toMatchObject({ wasEnabled: false });
    expect((await new Browser().signIn(account.email)).location).toBe('/');
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const missing = await adminCall(fixture.api, `/accounts/${id}/two-factor/reset`, { method: 'POST' });
      expect(missing.status).toBe(404);
      expect(missing.body).toMatchObject({ error: 'Account not found' });
    }
    expect(
      (
        await adminCall(fixture.api, `/accounts/${account.id}/two-factor/reset`, {
          method: 'POST',
          admin: 'wrong',
        })
      ).status,
    ).toBe(401);

    const audit = await auditActions(account.id);
    expect(audit.filter((a) => a.action.startsWith('two_factor.'))).toEqual([
      expect.objectContaining({ action: 'two_factor.enabled', actor_kind: 'dashboard' }),
      expect.objectContaining({
        action: 'two_factor.disabled',
        actor_kind: 'dashboard',
        details: { with: 'recovery_code' },
      }),
      expect.objectContaining({ action: 'two_factor.enabled' }),
      expect.objectContaining({
        action: 'two_factor.reset',
        actor_kind: 'admin',
        details: { wasEnabled: true },
      }),
      // The second reset found it off: it changed nothing and wrote no entry.
    ]);
  });
});

describe('forms and OpenAPI', () => {
  it('refuses every new form without its CSRF token (403), signed in and at the code step', async () => {
    const account = await accountWithPassword();
    const b = new Browser();
    await b.signIn(account.email);
    await b.get('/security');
    const token = b.csrf;
    for (const path of [
      '/security/two-factor/start',
      '/security/two-factor/confirm',
      '/security/two-factor/disable',
      '/security/sessions/sign-out-others',
      '/security/sessions/00000000-0000-4000-8000-000000000000/sign-out',
    ]) {
      b.csrf = 'x'.repeat(43); // a refused page carries a valid token: forge again each time
      expect({ path, status: (await b.post(path, { code: '123456' })).status }).toEqual({
        path,
        status: 403,
      });
    }
    b.csrf = token;
    await enrol(b, account.id);
    const c = new Browser();
    await c.signIn(account.email);
    c.csrf = 'x'.repeat(43);
    expect((await c.post('/sign-in/code', { code: '123456' })).status).toBe(403);
  });

  it('the OpenAPI document has the admin reset', async () => {
    const doc = (await (await fetch(`${fixture.api.url}/api/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const path = Object.keys(doc.paths).find((p) => p.includes('two-factor/reset'));
    expect(path).toMatch(/^\/admin\/v1\/accounts\/\{id\}\/two-factor\/reset$/);
    expect(Object.keys(doc.paths[path!]!)).toEqual(['post']);
  });
});

describe('npx proxyfleet admin two-factor reset', () => {
  const cli = async (...argv: string[]) => {
    let out = '';
    let err = '';
    const env = { PROXYFLEET_API_URL: fixture.api.url, PROXYFLEET_ADMIN_TOKEN: TEST_ADMIN_TOKEN };
    const code = await runCli(argv, { out: (t) => (out += t), err: (t) => (err += t), fetch, env });
    return { code, out, err };
  };

  it('resets a customer’s two-factor sign-in; an unknown account exits 1 with the API’s message', async () => {
    const account = await accountWithPassword();
    const b = new Browser();
    await b.signIn(account.email);
    await enrol(b, account.id);
    const reset = await cli('admin', 'two-factor', 'reset', account.id);
    expect(reset.code).toBe(0);
    expect(JSON.parse(reset.out)).toEqual({
      accountId: account.id,
      twoFactorEnabled: false,
      wasEnabled: true,
    });
    expect((await new Browser().signIn(account.email)).location).toBe('/');
    const missing = await cli('admin', 'two-factor', 'reset', '00000000-0000-4000-8000-000000000000');
    expect(missing).toMatchObject({ code: 1, err: expect.stringContaining('Account not found') });
  });
});

describe('sessions', () => {
  it('lists the sessions with this one marked; Sign out ends another; Sign out everywhere else ends the rest; nobody ends another account’s', async () => {
    const account = await accountWithPassword();
    const a = new Browser();
    const b = new Browser(
      'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
    );
    const c = new Browser('curl/8.5.0');
    for (const x of [a, b, c]) await x.signIn(account.email);
    const page = await a.get('/security');
    expect(page.text).toContain('Firefox 133 on Linux <strong>(this session)</strong>');
    expect(page.text).toContain('Chrome 131 on Windows');
    expect(page.text).toContain('127.0.0.1');
    const ids = [...page.text.matchAll(/action="\/security\/sessions\/([0-9a-f-]{36})\/sign-out"/g)].map(
      (m) => m[1]!,
    );
    expect(ids).toHaveLength(2);

    // Another account cannot end them (404, nothing ended).
    const stranger = await accountWithPassword();
    const s = new Browser();
    await s.signIn(stranger.email);
    await s.get('/security');
    expect((await s.post(`/security/sessions/${ids[0]}/sign-out`)).status).toBe(404);
    expect((await s.post('/security/sessions/not-a-uuid/sign-out')).status).toBe(404);

    const { rows } = await fixture.db.pool.query<{ id: string }>(
      `SELECT id FROM dashboard_sessions WHERE account_id = $1 AND user_agent LIKE '%Chrome%'`,
      [account.id],
    );
    const ended = await a.post(`/security/sessions/${rows[0]!.id}/sign-out`);
    expect(ended.location).toBe('/security?done=signed-out');
    expect((await b.get('/security')).location).toBe('/sign-in');
    expect((await c.get('/security')).status).toBe(200);
    await a.get('/security');
    expect((await a.post('/security/sessions/sign-out-others')).location).toBe('/security?done=others');
    expect((await c.get('/security')).location).toBe('/sign-in');
    const mine = await a.get('/security?done=others');
    expect(mine.status).toBe(200);
    expect(mine.text).toContain('Every other session is signed out.');
    expect(mine.text).not.toContain('Sign out everywhere else');

    const audit = await auditActions(account.id);
    const revoked = audit.filter((a) => a.action === 'session.revoked');
    expect(revoked.map((r) => r.details)).toEqual([{ scope: 'one' }, { scope: 'all_others' }]);
    expect(revoked[0]).toMatchObject({
      actor_kind: 'dashboard',
      actor_id: account.email,
      target_type: 'session',
      target_id: rows[0]!.id,
    });
  });

  it('writes last seen at most once a minute', async () => {
    const account = await accountWithPassword();
    const a = new Browser();
    await a.signIn(account.email);
    const seen = async () =>
      (
        await fixture.db.pool.query<{ t: Date }>(
          'SELECT last_seen_at AS t FROM dashboard_sessions WHERE account_id = $1',
          [account.id],
        )
      ).rows[0]!.t.getTime();
    await fixture.db.pool.query(
      `UPDATE dashboard_sessions SET last_seen_at = now() - interval '30 seconds' WHERE account_id = $1`,
      [account.id],
    );
    const before = await seen();
    await a.get('/security');
    expect(await seen()).toBe(before);
    await fixture.db.pool.query(
      `UPDATE dashboard_sessions SET last_seen_at = now() - interval '61 seconds' WHERE account_id = $1`,
      [account.id],
    );
    const older = await seen();
    await a.get('/security');
    expect(await seen()).toBeGreaterThan(older);
  });
});
