// Signing in and out of the dashboard in a real Chromium against the real API and database: the
// invite and its email, setting the password through the one-time link, sign-in (cookies, every
// page behind the navigation with an axe-core check), sign-out, "Forgot password?", throttling,
// suspension, HTTPS cookies, and no secret in the log. The signed-in pages are in
// pages.browser.int.test.ts.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { BrowserContext, Page } from 'playwright-core';
import { sha256 } from '#common/secrets.ts';
import { startTestApi, type CallOptions, type TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
  postForm,
  shot,
  signedOutForm,
  signIn,
  startDashboardRun,
  STRONG,
  type DashboardRun,
} from '#test/dashboard.ts';
import type { TestDatabase } from '#test/db.ts';
import { exampleEmail } from '#test/fixtures.ts';

// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

let run: DashboardRun;
let db: TestDatabase;
let api: TestApi;
let context: BrowserContext;
let page: Page;
let account: { id: string; email: string; apiKey: string; proxyUsername: string };
const secrets: string[] = [];

const admin = (p: string, o: CallOptions = {}) => adminCall(api, p, o);

describeInChromium('customer dashboard in Chromium: signing in and out', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ db, api, context, page } = run);
    const created = await admin('/accounts', { body: { email: exampleEmail('dash') } });
    expect(created.status).toBe(201);
    account = created.body as typeof account;
    secrets.push(account.apiKey, STRONG);
  }, 60_000);

  afterAll(async () => {
    await run?.close();
  });

  it('serves the sign-in page at / when signed out, with a strict CSP and no third-party origin', async () => {
    const res = await page.goto(`${api.url}/`);
    expect(res!.status()).toBe(200);
    await expect(page.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    await expect(page.getByRole('link', { name: 'Forgot password?' }).isVisible()).resolves.toBe(true);
    const csp = res!.headers()['content-security-policy']!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(res!.headers()['x-frame-options']).toBe('DENY');
    await axe(page, 'sign-in');
    await shot(page, 'sign-in');
  });

  let inviteUrl: string;
  it('invites through the admin API: 201 {url, expiresAt}, and the link is emailed through the outbox', async () => {
    const res = await admin(`/accounts/${account.id}/dashboard-invite`, { method: 'POST' });
    expect(res.status).toBe(201);
    const body = res.body as { url: string; expiresAt: string };
    expect(body.url).toMatch(new RegExp(`^${api.url}/set-password\\?token=[A-Za-z0-9_-]{43}$`));
    expect(Date.parse(body.expiresAt)).toBeGreaterThan(Date.now() + 6 * 24 * 3600_000);
    inviteUrl = body.url;
    secrets.push(new URL(inviteUrl).searchParams.get('token')!);
    const { rows } = await db.pool.query<{ to_address: string; body_text: string }>(
      `SELECT to_address, body_text FROM email_outbox WHERE account_id = $1 AND kind = 'dashboard_invite'`,
      [account.id],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.to_address).toBe(account.email);
    expect(rows[0]!.body_text).toContain(inviteUrl);
    expect(
      (await admin('/accounts/00000000-0000-4000-8000-000000000000/dashboard-invite', { method: 'POST' }))
        .status,
    ).toBe(404);
  });

  it('sets the password through the link: short and weak passwords refused, then the link works once', async () => {
    await page.goto(inviteUrl);
    await axe(page, 'set-password');
    await shot(page, 'set-password');
    await page.getByLabel('New password').fill('short');
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('at least 10 characters');
    await page.getByLabel('New password').fill('password1234');
    await page.getByRole('button', { name: 'Set password' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('too easy to guess');
    await page.getByLabel('New password').fill(STRONG);
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.waitForURL(`${api.url}/sign-in?done=password`);
    await expect(page.getByRole('status').filter({ hasText: 'password is set' }).isVisible()).resolves.toBe(
      true,
    );
    const again = await page.goto(inviteUrl);
    expect(again!.status()).toBe(410);
    await expect(page.getByRole('heading', { name: 'This link does not work' }).isVisible()).resolves.toBe(
      true,
    );
  });

  it('refuses a wrong password without saying which field was wrong', async () => {
    await signIn(page, account.email, 'not the password at all');
    const text = await page.getByRole('alert').textContent();
    expect(text).toBe('The email or password is not right.');
    await signIn(page, 'nobody-' + account.email, STRONG);
    await expect(page.getByRole('alert').textContent()).resolves.toBe(text);
  });

  let sessionCookie: string;
  it('signs in; the session cookie is HttpOnly and SameSite=Lax; navigation and every page pass axe', async () => {
    await signIn(page, account.email, STRONG);
    await page.waitForURL(`${api.url}/`);
    const cookie = (await context.cookies()).find((c) => c.name === 'pf_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', secure: false });
    sessionCookie = cookie.value;
    const nav = [
      ['Overview', '/'],
      ['Proxies', '/proxies'],
      ['Sub-users', '/sub-users'],
      ['Billing', '/billing'],
      ['Settings', '/settings'],
    ] as const;
    for (const [name, href] of [...nav.slice(1), nav[0]]) {
      await page.getByRole('navigation').getByRole('link', { name, exact: true }).click();
      await page.waitForURL(api.url + href);
      await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe(name);
      await axe(page, name);
    }
    await expect(page.getByRole('button', { name: 'Sign out' }).isVisible()).resolves.toBe(true);
  });

  it('signing out ends the session on the server', async () => {
    await page.goto(`${api.url}/`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${api.url}/sign-in`);
    const { rows } = await db.pool.query('SELECT 1 FROM dashboard_sessions WHERE token_hash = $1', [
      sha256(sessionCookie),
    ]);
    expect(rows).toHaveLength(0);
    // The old cookie, replayed by a plain client, no longer opens anything.
    const res = await fetch(`${api.url}/keys`, {
      redirect: 'manual',
      headers: { cookie: `pf_session=${sessionCookie}` },
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/sign-in');
  });

  it('"Forgot password?" answers the same for known and unknown emails and emails a reset link', async () => {
    for (const email of [account.email, exampleEmail('nobody')]) {
      await page.goto(`${api.url}/sign-in`);
      await page.getByRole('link', { name: 'Forgot password?' }).click();
      await page.getByLabel('Email').fill(email);
      await page.getByRole('button', { name: 'Send reset link' }).click();
      await expect(
        page.getByRole('status').filter({ hasText: 'If an account exists' }).isVisible(),
      ).resolves.toBe(true);
    }
    await axe(page, 'forgot password sent');
    await api.api.resetRequests.idle(); // the lookup and the link come after the answer
    const { rows } = await db.pool.query<{ body_text: string }>(
      `SELECT body_text FROM email_outbox WHERE kind = 'dashboard_reset'`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.body_text).toContain(account.email === rows[0]!.body_text ? '' : '/set-password?token=');
  });

  it('throttles failed sign-ins per account and per address', async () => {
    const form = await signedOutForm(api.url);
    for (let i = 0; i < 5; i++) {
      const res = await postForm(
        api.url,
        '/sign-in',
        { _csrf: form.csrf, email: account.email, password: `wrong ${i}` },
        form.cookie,
      );
      expect(res.status).toBe(401);
    }
    const locked = await postForm(
      api.url,
      '/sign-in',
      { _csrf: form.csrf, email: account.email, password: STRONG },
      form.cookie,
    );
    expect(locked.status).toBe(429);
    expect(await locked.text()).toContain('Too many failed sign-in attempts');
    await db.pool.query('DELETE FROM dashboard_login_failures');

    const from = { 'x-forwarded-for': '198.51.100.7' };
    const other = await signedOutForm(api.url, from);
    for (let i = 0; i < 20; i++) {
      const res = await postForm(
        api.url,
        '/sign-in',
        { _csrf: other.csrf, email: exampleEmail('guess'), password: 'guess' },
        other.cookie,
        from,
      );
      expect(res.status).toBe(401);
    }
    const blocked = await postForm(
      api.url,
      '/sign-in',
      { _csrf: other.csrf, email: account.email, password: STRONG },
      other.cookie,
      from,
    );
    expect(blocked.status).toBe(429);
    // Another address is not affected.
    const ok = await postForm(
      api.url,
      '/sign-in',
      { _csrf: form.csrf, email: account.email, password: STRONG },
      form.cookie,
    );
    expect(ok.status).toBe(303);
  }, 180_000);

  it('a suspended account cannot sign in, and its open sessions stop working', async () => {
    const p = await context.newPage();
    await signIn(p, account.email, STRONG);
    await p.waitForURL(`${api.url}/`);
    expect((await admin(`/accounts/${account.id}/suspend`, { method: 'POST' })).status).toBe(200);
    await p.goto(`${api.url}/keys`);
    await expect(p.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    await signIn(p, account.email, STRONG);
    await expect(p.getByRole('alert').textContent()).resolves.toContain('suspended');
    await p.close();
  });

  it('never wrote a key, password or link token to the log', () => {
    expect(run.logLines.length).toBeGreaterThan(10);
    const log = run.logLines.join('');
    expect(secrets.filter((secret) => log.includes(secret))).toEqual([]);
  });

  it('over HTTPS (behind a TLS-terminating proxy) cookies are Secure with the __Host- prefix', async () => {
    const https = await startTestApi(db, {
      env: { PROXYFLEET_DASHBOARD_HTTPS: 'true', PROXYFLEET_API_TRUST_PROXY_HOPS: '1' },
    });
    try {
      const res = await fetch(`${https.url}/sign-in`, { headers: { 'x-forwarded-proto': 'https' } });
      const cookie = res.headers.getSetCookie().find((c) => c.startsWith('__Host-pf_pre='))!;
      expect(cookie).toMatch(/; Path=\//);
      expect(cookie).toMatch(/; HttpOnly/);
      expect(cookie).toMatch(/; Secure/);
      expect(cookie).toMatch(/; SameSite=Lax/);
      expect(cookie).not.toMatch(/Domain=/);
      expect(res.headers.get('strict-transport-security')).toContain('max-age=31536000');
    } finally {
      await https.close();
    }
  });
});
