// The Activity page in a real Chromium against the real API and database: changes made on the
// dashboard (actor: the signed-in email), through the API (actor: the key) and by an operator are
// listed newest first with who, from where and what, without a secret; "Older" pages back to the
// account's creation; axe at 1280 and 375 px.
import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import type { Page } from 'playwright-core';
import { call, type CallOptions, type TestApi } from '#test/api.ts';
import {
  adminCall,
  axe,
  describeInChromium,
  newContext,
  postForm,
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
let account: { id: string; email: string; apiKey: string; proxyPassword: string };
const secrets: string[] = [];

const admin = (p: string, o: CallOptions = {}) => adminCall(api, p, o);
/** The cells of the Activity table's body rows, as text. */
const rows = (p: Page) =>
  p
    .locator('table tbody tr')
    .evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => (td.textContent ?? '').trim())),
    );

describeInChromium('customer dashboard in Chromium: Activity', () => {
  beforeAll(async () => {
    run = await startDashboardRun();
    ({ api, page } = run);
    const created = await admin('/accounts', { body: { email: exampleEmail('activity') } });
    expect(created.status).toBe(201);
    account = created.body as typeof account;
    secrets.push(account.apiKey, account.proxyPassword, STRONG);
    const inviteUrl = await signInThroughInvite(run, account);
    secrets.push(new URL(inviteUrl).searchParams.get('token')!);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  it('lists dashboard, API and operator changes newest first, with who and from where, and no secret', async () => {
    // On the dashboard: a named key created and revoked.
    await page.goto('/settings');
    await page.getByLabel('Key name').fill('deploy');
    await page.getByRole('button', { name: 'Create key' }).click();
    const named = await page.getByLabel('New API key').inputValue();
    secrets.push(named);
    const row = page.getByRole('row', { name: /deploy/ });
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.waitForURL(`${api.url}/settings?done=revoked`);
    // Through the API with the primary key, then by an operator.
    const put = await call(api.url, '/api/v1/account/target-stats', {
      key: account.apiKey,
      method: 'PUT',
      body: { enabled: false },
    });
    expect(put.status).toBe(200);
    expect(
      (
        await admin(`/accounts/${account.id}/throttle/basic`, {
          method: 'PUT',
          body: { bytesPerSecond: 1_000_000 },
        })
      ).status,
    ).toBe(200);

    await page.getByRole('link', { name: 'Activity' }).click();
    await page.waitForURL(`${api.url}/activity`);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Activity');
    const cells = await rows(page);
    const prefix = account.apiKey.slice(0, 15);
    expect(cells.map((c) => [c[1], c[2], c[3]])).toEqual([
      ['Operator', '127.0.0.1', 'Throttle updated'],
      [`API key primary (${prefix}…${account.apiKey.slice(-4)})`, '127.0.0.1', 'Target statistics updated'],
      [account.email, '127.0.0.1', 'API key revoked'],
      [account.email, '127.0.0.1', 'API key created'],
      [account.email, '127.0.0.1', 'Session signed in'],
      // The invite link used in beforeAll (docs/security.md, "Audit log": password.set).
      [account.email, '127.0.0.1', 'Password set'],
      // The operator's invite that sent the link.
      ['Operator', '127.0.0.1', 'Password invited'],
      ['Operator', '127.0.0.1', 'Account created'],
    ]);
    expect(cells[2]![4]).toContain('name: deploy');
    expect(cells[0]![0]).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/);
    const text = await page.content();
    expect(secrets.filter((s) => text.includes(s))).toEqual([]);
    await expect(page.getByRole('link', { name: 'Older' }).count()).resolves.toBe(0);
    await axe(page, 'activity');
    await shot(page, 'activity');
  });

  it('pages with "Older" (50 a page) back to the account\'s creation, and back to "Newest"', async () => {
    for (let i = 0; i < 50; i++) {
      const res = await call(api.url, '/api/v1/account/target-stats', {
        key: account.apiKey,
        method: 'PUT',
        body: { enabled: i % 2 === 0 },
      });
      expect(res.status).toBe(200);
    }
    await page.goto('/activity');
    const first = await rows(page);
    expect(first).toHaveLength(50);
    expect(first[0]![4]).toBe('enabled: false'); // the last of the 50: i = 49
    await page.getByRole('link', { name: 'Older' }).click();
    await page.waitForURL(/\/activity\?cursor=/);
    const second = await rows(page);
    expect(second.map((c) => c[3]).slice(-8)).toEqual([
      'Throttle updated',
      'Target statistics updated',
      'API key revoked',
      'API key created',
      'Session signed in',
      'Password set',
      'Password invited',
      'Account created',
    ]);
    expect(second).toHaveLength(58 - 50);
    await expect(page.getByRole('link', { name: 'Older' }).count()).resolves.toBe(0);
    await axe(page, 'activity, older page');
    await page.getByRole('link', { name: 'Newest' }).click();
    await page.waitForURL(`${api.url}/activity`);
    expect(await rows(page)).toEqual(first);
  });

  it('a cursor it did not issue: 400, said on the page, the newest entries shown', async () => {
    const res = await page.goto('/activity?cursor=bogus');
    expect(res?.status()).toBe(400);
    await expect(page.getByRole('alert').textContent()).resolves.toContain(
      'That page of the activity does not exist',
    );
    expect(await rows(page)).toHaveLength(50);
  });

  it('works 375 px wide: fits and passes axe', async () => {
    const narrow = await newContext(run.browser, api.url, { width: 375, height: 800 });
    const p = await narrow.newPage();
    await signIn(p, account.email, STRONG);
    await p.waitForURL(`${api.url}/`);
    await p.goto('/activity');
    await axe(p, 'activity at 375 px');
    const width = await p.evaluate<number>('document.documentElement.scrollWidth');
    expect(width).toBe(375);
    await shot(p, 'activity-375');
    await narrow.close();
  });

  it('every change made on the dashboard is recorded with the signed-in email and the address', async () => {
    const cookie = (await run.context.cookies())
      .filter((c) => c.name === 'pf_session')
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
    const csrf = /name="_csrf" value="([^"]+)"/.exec(
      await (await fetch(`${api.url}/keys`, { headers: { cookie } })).text(),
    )![1]!;
    const post = async (path: string, fields: Record<string, string> = {}) => {
      const res = await postForm(api.url, path, { _csrf: csrf, ...fields }, cookie);
      expect({ path, ok: res.status >= 200 && res.status < 400 }).toEqual({ path, ok: true });
      return res;
    };
    const newest = async (action: string) => {
      const log = await admin(`/accounts/${account.id}/audit-log?limit=200`);
      return (
        log.body.entries as { action: string; actor: unknown; details: Record<string, unknown> }[]
      ).find((e) => e.action === action);
    };
    const subUserId = async (name: string) =>
      (
        (await admin(`/accounts/${account.id}/sub-users`)).body.subUsers as { id: string; name: string }[]
      ).find((x) => x.name === name)!.id;
    const entryId = async () =>
      ((await admin(`/accounts/${account.id}/ip-allowlist`)).body.entries as { id: string }[])[0]!.id;

    const steps: [action: string, act: () => Promise<unknown>][] = [
      ['alerts.updated', () => post('/settings/alerts', { lowBandwidth: 'on', lowBandwidthPercent: '20' })],
      ['target_stats.updated', () => post('/settings/target-stats', { targetStats: 'on' })],
      [
        'auto_refill.updated',
        () =>
          post('/billing/auto-refill/basic', {
            enabled: 'on',
            thresholdGb: '1',
            refillGb: '5',
            maxRefillsPerMonth: '2',
          }),
      ],
      ['ip_allowlist.added', () => post('/proxies/allowlist', { product: 'basic', cidr: '198.51.100.20' })],
      ['ip_allowlist.removed', async () => post(`/proxies/allowlist/${await entryId()}/remove`)],
      ['proxy_password.reset', () => post('/proxies/reset-password')],
      ['api_key.regenerated', () => post('/settings/regenerate-key')],
      ['sub_user.created', () => post('/sub-users', { name: 'dash-team', password: 'DashSecret12345' })],
      [
        'sub_user.updated',
        async () => post(`/sub-users/${await subUserId('dash-team')}/status`, { status: 'suspended' }),
      ],
      ['sub_user.deleted', async () => post(`/sub-users/${await subUserId('dash-team')}/delete`)],
    ];
    for (const [action, act] of steps) {
      const before = (await admin(`/accounts/${account.id}/audit-log?limit=1`)).body.entries[0];
      await act();
      const entry = await newest(action);
      expect({ action, entry }).toEqual({
        action,
        entry: expect.objectContaining({ actor: { kind: 'dashboard', id: account.email, ip: '127.0.0.1' } }),
      });
      expect(entry).not.toEqual(before);
      const text = JSON.stringify(entry);
      expect(text).not.toContain('DashSecret12345');
      expect(text).not.toMatch(/svc_live_[0-9a-f]{20}/);
    }
  });

  it('never wrote a key, password or link token to the log', () => {
    const log = run.logLines.join('');
    expect(secrets.filter((secret) => log.includes(secret))).toEqual([]);
  });
});
