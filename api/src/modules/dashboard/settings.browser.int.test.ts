// The Settings page in a real Chromium, against the real API and database, signed in as a customer
// is (invited, password set through the link): reached from the navigation and from the former
// Keys and Alerts addresses; the primary key regenerated after a confirmation (old 401, new 200 at
// once), shown once with Copy and why it is not shown again; a named key created and revoked; the
// alert toggles and the privacy setting saved; axe at 1280 and 375 px, and no key in the log.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import { call, type CallOptions, type TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
  newContext,
  shot,
  signIn,
  signInThroughInvite,
  startDashboardRun,
  STRONG,
  type DashboardRun,
} from '#test/dashboard.ts';
import { exampleEmail } from '#test/fixtures.ts';

// A browser on a shared 2-core machine: generous per-test limits; nothing here measures speed.
jest.setTimeout(180_000);

let run: DashboardRun;
let api: TestApi;
let page: Page;
let account: { id: string; email: string; apiKey: string };
const secrets: string[] = [];

const admin = (p: string, o: CallOptions = {}) => adminCall(api, p, o);
const usageStatus = async (key: string) => (await call(api.url, '/api/v1/usage', { key })).status;

describeInChromium('customer dashboard in Chromium: Settings (API keys and alerts)', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    const created = await admin('/accounts', { body: { email: exampleEmail('settings') } });
    expect(created.status).toBe(201);
    account = created.body as typeof account;
    secrets.push(account.apiKey, STRONG);
    const invite = await signInThroughInvite(run, account);
    secrets.push(new URL(invite).searchParams.get('token')!);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  it('is in the navigation; the former Keys and Alerts addresses move there for good', async () => {
    await page.getByRole('navigation').getByRole('link', { name: 'Settings', exact: true }).click();
    await page.waitForURL(`${api.url}/settings`);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Settings');
    for (const name of ['API keys', 'Alerts'])
      await expect(page.getByRole('heading', { level: 2, name, exact: true }).isVisible()).resolves.toBe(
        true,
      );
    const cookie = (await run.context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    for (const [from, to] of [
      ['/keys', '/settings#api-keys'],
      ['/alerts', '/settings#alerts'],
    ] as const) {
      const res = await fetch(api.url + from, { redirect: 'manual', headers: { cookie } });
      expect({ from, status: res.status, location: res.headers.get('location') }).toEqual({
        from,
        status: 301,
        location: to,
      });
      await page.goto(from);
      expect(page.url()).toBe(`${api.url}${to}`);
    }
  });

  it('regenerates the primary key only after a confirmation, shows it once with Copy, and says why only once', async () => {
    await page.goto('/settings');
    const oldKey = account.apiKey;
    await expect(page.getByText(`${oldKey.slice(0, 15)}…${oldKey.slice(-4)}`).isVisible()).resolves.toBe(
      true,
    );
    expect(await page.content()).not.toContain(oldKey);
    await expect(page.locator('#why-once').textContent()).resolves.toMatch(
      /shown only when it is created or regenerated[\s\S]*cannot be turned back into the key/,
    );

    // Cancel changes nothing.
    await page.getByRole('button', { name: 'Regenerate primary key' }).click();
    const dialog = page.getByRole('dialog');
    await expect(dialog.isVisible()).resolves.toBe(true);
    await axe(page, 'regenerate dialog');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await expect(dialog.isVisible()).resolves.toBe(false);
    expect(await usageStatus(oldKey)).toBe(200);

    await page.getByRole('button', { name: 'Regenerate primary key' }).click();
    await dialog.getByRole('button', { name: 'Regenerate' }).click();
    const newKey = await page.getByLabel('New API key').inputValue();
    secrets.push(newKey);
    expect(newKey).toMatch(/^svc_live_[0-9a-f]{48}$/);
    expect(await page.getByLabel('New API key').getAttribute('readonly')).not.toBeNull();
    expect(await usageStatus(oldKey)).toBe(401);
    expect(await usageStatus(newKey)).toBe(200);
    await page.getByRole('button', { name: 'Copy' }).click();
    await expect(page.evaluate<string>('navigator.clipboard.readText()')).resolves.toBe(newKey);
    await expect(page.getByText(`${newKey.slice(0, 15)}…${newKey.slice(-4)}`).isVisible()).resolves.toBe(
      true,
    );
    account.apiKey = newKey;

    // Shown once: the page opened again has only its prefix and last four.
    await page.goto('/settings');
    await expect(page.getByLabel('New API key').count()).resolves.toBe(0);
    expect(await page.content()).not.toContain(newKey);
  });

  it('creates a named key (a refused name is explained), shows it once, and revokes it after a confirmation', async () => {
    await page.goto('/settings');
    await page.getByLabel('Key name').fill('<script>');
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('Key name: must be letters');
    await page.getByLabel('Key name').fill('ci deploy');
    await page.getByRole('button', { name: 'Create key' }).click();
    const named = await page.getByLabel('New API key').inputValue();
    secrets.push(named);
    expect(named).toMatch(/^svc_live_[0-9a-f]{48}$/);
    expect(await usageStatus(named)).toBe(200);
    const row = page.getByRole('row', { name: /ci deploy/ });
    await expect(row.textContent()).resolves.toContain(`${named.slice(0, 15)}…${named.slice(-4)}`);
    await axe(page, 'settings with new key');
    await shot(page, 'settings');
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.waitForURL(`${api.url}/settings?done=revoked`);
    expect(await usageStatus(named)).toBe(401);
    await expect(page.getByRole('row', { name: /ci deploy/ }).count()).resolves.toBe(0);
  });

  it('saves the alert toggles the admin API shows, refuses a bad threshold, and the privacy setting', async () => {
    await page.goto('/settings');
    // A threshold outside 1..99 (the browser's own check taken away, as a script could) is refused.
    const threshold = page.getByLabel('Low-bandwidth threshold (% remaining)');
    await threshold.evaluate((input) => input.removeAttribute('min'));
    await threshold.fill('0');
    await page.getByRole('button', { name: 'Save' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain(
      'Low-bandwidth threshold: a whole number from 1 to 99',
    );
    await page.goto('/settings');
    await expect(page.getByLabel('Low bandwidth').isChecked()).resolves.toBe(true);
    await expect(page.getByLabel('Server alerts').isChecked()).resolves.toBe(false);
    await page.getByLabel('Low bandwidth').uncheck();
    await page.getByLabel('Server alerts').check();
    await page.getByLabel('Low-bandwidth threshold (% remaining)').fill('25');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.waitForURL(`${api.url}/settings?done=saved#alerts`);
    await expect(page.getByText('Alert settings saved.').isVisible()).resolves.toBe(true);
    const view = await admin(`/accounts/${account.id}`);
    expect((view.body as { alerts: unknown }).alerts).toEqual({
      lowBandwidth: false,
      newInvoice: true,
      serverAlerts: true,
      lowBandwidthPercent: 25,
      lowBandwidthFloorGb: null,
    });
    await axe(page, 'alerts saved');

    // Opting out of target statistics deletes them; the Overview says they are off.
    await page.getByLabel('Record target statistics').uncheck();
    await page.getByRole('button', { name: 'Update privacy setting' }).click();
    await page.waitForURL(`${api.url}/settings?done=privacy#alerts`);
    await expect(page.getByLabel('Record target statistics').isChecked()).resolves.toBe(false);
    const targets = await admin(`/accounts/${account.id}/usage/targets`);
    expect(targets.body).toMatchObject({ enabled: false, targets: [] });
    await page.goto('/');
    await page.getByText('Target statistics are off for this account').waitFor();
  });

  it('works 375 px wide and passes axe', async () => {
    const narrow = await newContext(run.browser, api.url, { width: 375, height: 800 });
    const p = await narrow.newPage();
    await signIn(p, account.email, STRONG);
    await p.waitForURL(`${api.url}/`);
    await p.goto('/settings');
    await axe(p, 'settings at 375 px');
    expect(await p.evaluate<number>('document.documentElement.scrollWidth')).toBe(375);
    await shot(p, 'settings-375');
    await narrow.close();
  });

  it('never wrote a key, password or link token to the log', () => {
    expect(run.logLines.length).toBeGreaterThan(10);
    const log = run.logLines.join('');
    expect(secrets.filter((secret) => log.includes(secret))).toEqual([]);
  });
});
