// Links in emails come from configuration only (docs/security.md, "Links in emails"): a reset or
// an invite asked for with a forged Host, X-Forwarded-Host or Forwarded header still mails the
// configured dashboard URL (or, unset, the API's own listen address), read from the real email a
// real SMTP server received. The API trusts one proxy hop, as behind an ingress.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { createLogger } from '#common/logger.ts';
import { startTestApi, type TestApi } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { signedOutForm } from '#test/dashboard.ts';
import { TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { startTestSmtpServer, type TestSmtpServer } from '#test/smtp.ts';
import { emailSenderJob } from '../../../../worker/src/jobs/email.ts';

const CONFIGURED = 'https://dash.example.test';
const FORGERIES: Record<string, Record<string, string>> = {
  Host: { host: 'evil.example' },
  'X-Forwarded-Host': { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' },
  Forwarded: { forwarded: 'for=192.0.2.1;host=evil.example;proto=https' },
};

let db: TestDatabase;
let smtp: TestSmtpServer;
let configured: TestApi;
let unset: TestApi;

beforeAll(async () => {
  db = await createTestDatabase();
  smtp = await startTestSmtpServer();
  const env = { PROXYFLEET_API_TRUST_PROXY_HOPS: '1' };
  configured = await startTestApi(db, { env: { ...env, PROXYFLEET_DASHBOARD_URL: CONFIGURED } });
  unset = await startTestApi(db, { env });
});
afterAll(async () => {
  await configured?.close();
  await unset?.close();
  await smtp?.close();
  await db?.drop();
});

/** node:http, because fetch refuses to send a Host header of its own. */
function request(
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: init.method, headers: init.headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** Sends the outbox and returns the link in the newest email to `to`. */
async function mailedLink(to: string): Promise<string> {
  const logger = createLogger('test', 'silent');
  const job = emailSenderJob({
    smtpUrl: smtp.url,
    from: 'pf <a@example.test>',
    logger,
    registry: new Registry(),
  });
  await job.run({ pool: db.pool, logger });
  const mail = smtp.messages.filter((m) => m.to && JSON.stringify(m.to).includes(to)).at(-1);
  const link = /https?:\/\/\S+\/set-password\?token=\S+/.exec(mail?.text ?? '')?.[0];
  expect(link).toBeDefined();
  return link!;
}

async function askForReset(api: TestApi, email: string, forged: Record<string, string>): Promise<void> {
  // The form comes the way the post goes: over HTTPS (a trusted hop's X-Forwarded-Proto), its
  // cookie is the __Host- one, and a plain-HTTP pf_pre would not be read there.
  const proto = forged['x-forwarded-proto'];
  const { cookie, csrf } = await signedOutForm(api.url, proto ? { 'x-forwarded-proto': proto } : {});
  const body = new URLSearchParams({ _csrf: csrf, email }).toString();
  const status = await request(`${api.url}/forgot-password`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, ...forged },
    body,
  });
  expect(status).toBe(200);
  await api.api.resetRequests.idle(); // the lookup and the link come after the answer
}

async function invite(api: TestApi, accountId: string, forged: Record<string, string>): Promise<void> {
  const status = await request(`${api.url}/admin/v1/accounts/${accountId}/dashboard-invite`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, ...forged },
  });
  expect(status).toBe(201);
}

describe.each(Object.entries(FORGERIES))('a forged %s header', (_name, forged) => {
  it.each([
    ['configured', () => configured, () => CONFIGURED],
    ['unset', () => unset, () => unset.url],
  ])('never reaches a reset link (PROXYFLEET_DASHBOARD_URL %s)', async (_how, api, base) => {
    const account = await accountWithBandwidth(db.pool);
    await askForReset(api(), account.email, forged);
    const link = await mailedLink(account.email);
    expect(link).not.toContain('evil');
    expect(link.startsWith(`${base()}/set-password?token=`)).toBe(true);
  });

  it.each([
    ['configured', () => configured, () => CONFIGURED],
    ['unset', () => unset, () => unset.url],
  ])('never reaches an invite link (PROXYFLEET_DASHBOARD_URL %s)', async (_how, api, base) => {
    const account = await accountWithBandwidth(db.pool);
    await invite(api(), account.id, forged);
    const link = await mailedLink(account.email);
    expect(link).not.toContain('evil');
    expect(link.startsWith(`${base()}/set-password?token=`)).toBe(true);
  });
});
