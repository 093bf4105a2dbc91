// The Security page in a real Chromium against the real API and database: turning two-factor
// sign-in on (the secret read from the page, the code computed with otpauth as an authenticator
// app would), signing out and in with a code, signing in with a recovery code, and signing out a
// session of another browser; axe at 1280 and 375 px, and no CSP violation from the inline QR code.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { BrowserContext, Page } from 'playwright-core';
import {
  adminCall,
  axe,
  describeInChromium,
  newContext,
  shot,
  signIn,
  startDashboardRun,
  STRONG,
  type DashboardRun,
} from '#test/dashboard.ts';
import { exampleEmail } from '#test/fixtures.ts';
import { freshCode } from '#test/totp.ts';
import { hashPassword } from './passwords.ts';

// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

let run: DashboardRun;
let page: Page;
let account: { id: string; email: string };
let secret: string;
let recoveryCodes: string[];
const cspViolations: string[] = [];

const code = () => freshCode(run.db.pool, account.id, secret);

async function signOut(p: Page) {
  await p.getByRole('button', { name: 'Sign out', exact: true }).click();
  await p.waitForURL(`${run.api.url}/sign-in`);
}

describeInChromium('customer dashboard in Chromium: two-factor sign-in and sessions', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    page = run.page;
    // Every CSP violation is said on the console (an init script runs whatever the page's CSP).
    await page.addInitScript(
      "document.addEventListener('securitypolicyviolation', (e) => console.error('Content Security Policy violation: ' + e.violatedDirective));",
    );
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    const created = await adminCall(run.api, '/accounts', { body: { email: exampleEmail('security') } });
    expect(created.status).toBe(201);
    account = created.body as typeof account;
    // Cheap scrypt parameters: verifyPassword reads them from the stored hash.
    await run.db.pool.query('INSERT INTO dashboard_credentials (account_id, password_hash) VALUES ($1, $2)', [
      account.id,
      await hashPassword(STRONG, { N: 2 ** 10, r: 8, p: 1 }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await run?.close();
  });

  it('turns two-factor sign-in on: secret and QR code, a wrong code refused and kept, then 10 recovery codes', async () => {
    await signIn(page, account.email, STRONG);
    await page.waitForURL(`${run.api.url}/`);
    await page.getByRole('navigation').getByRole('link', { name: 'Security', exact: true }).click();
    await page.waitForURL(`${run.api.url}/security`);
    await axe(page, 'security (off)');
    await page.getByLabel('Password').fill(STRONG);
    await page.getByRole('button', { name: 'Turn on two-factor authentication' }).click();
    await expect(page.getByRole('img', { name: /^QR image/ }).isVisible()).resolves.toBe(true);
    secret = (await page.locator('#totp-secret').textContent())!.replace(/\s/g, '');
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    await axe(page, 'security (turning on)');
    await shot(page, 'security-turning-on');

    await page.getByLabel('Code').fill('12345');
    await page.getByRole('button', { name: 'Confirm' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('that code is not right');
    await expect(page.getByLabel('Code').inputValue()).resolves.toBe('12345');

    await page.getByLabel('Code').fill(await code());
    await page.getByRole('button', { name: 'Confirm' }).click();
    await expect(
      page.getByRole('status').filter({ hasText: 'Two-factor authentication is on.' }).isVisible(),
    ).resolves.toBe(true);
    recoveryCodes = await page
      .getByRole('list', { name: 'Recovery codes' })
      .getByRole('listitem')
      .allTextContents();
    expect(recoveryCodes).toHaveLength(10);
    await axe(page, 'security (recovery codes)');
    await shot(page, 'security-recovery-codes');
    await page.getByRole('link', { name: 'I have saved them' }).click();
    await expect(
      page.getByRole('button', { name: 'Turn off two-factor authentication' }).isVisible(),
    ).resolves.toBe(true);
    expect(cspViolations).toEqual([]);
  });

  it('signs out and in again: the code is asked after the password', async () => {
    await signOut(page);
    await signIn(page, account.email, STRONG);
    await page.waitForURL(`${run.api.url}/sign-in/code`);
    await expect(page.getByRole('heading', { name: 'Enter your code' }).isVisible()).resolves.toBe(true);
    await axe(page, 'sign-in code');
    await shot(page, 'sign-in-code');
    await page.getByLabel('Code').fill(await code());
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${run.api.url}/`);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Overview');
  });

  it('signs in with a recovery code', async () => {
    await signOut(page);
    await signIn(page, account.email, STRONG);
    await page.waitForURL(`${run.api.url}/sign-in/code`);
    await page.getByLabel('Code').fill(recoveryCodes[0]!);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${run.api.url}/`);
    await page.goto('/security');
    await expect(page.getByText('Recovery codes left: 9').isVisible()).resolves.toBe(true);
  });

  let phone: BrowserContext;
  it('signs out a session of another browser (375 px wide), which then has to sign in again', async () => {
    phone = await newContext(run.browser, run.api.url, { width: 375, height: 800 });
    const other = await phone.newPage();
    await signIn(other, account.email, STRONG);
    await other.waitForURL(`${run.api.url}/sign-in/code`);
    await axe(other, 'sign-in code (375 px)');
    await expect(other.evaluate<number>('document.documentElement.scrollWidth')).resolves.toBe(375);
    await other.getByLabel('Code').fill(recoveryCodes[1]!);
    await other.getByRole('button', { name: 'Sign in' }).click();
    await other.waitForURL(`${run.api.url}/`);
    await other.goto('/security');
    await axe(other, 'security (375 px)');
    await expect(other.evaluate<number>('document.documentElement.scrollWidth')).resolves.toBe(375);
    await shot(other, 'security-375');

    await page.goto('/security');
    const sessions = page.getByRole('region', { name: 'Signed-in sessions' });
    await expect(sessions.getByRole('row').count()).resolves.toBe(3); // the heading row and two
    await expect(sessions.getByText('(this session)').count()).resolves.toBe(1);
    await axe(page, 'security (two sessions)');
    await sessions.getByRole('button', { name: /^Sign out .* from / }).click();
    await page.waitForURL(`${run.api.url}/security?done=signed-out`);
    await expect(
      page.getByRole('status').filter({ hasText: 'That session is signed out.' }).isVisible(),
    ).resolves.toBe(true);
    await expect(sessions.getByRole('row').count()).resolves.toBe(2);

    await other.reload();
    await expect(other.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    expect(cspViolations).toEqual([]);
    await phone.close();
  });
});
