// Server alerts against real local proxies (proxy-chain as the customer's ISP proxy), a real
// origin, real PostgreSQL and a real SMTP server: transitions, one email each, a proxy that
// hangs, and accounts with server alerts off.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { Server as ProxyServer } from 'proxy-chain';
import { Registry } from 'prom-client';
import { seal } from '#common/secrets.ts';
import { createLogger } from '#common/logger.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import type { Job, JobContext } from '../jobs.ts';
import { emailSenderJob } from './email.ts';
import { addresses, startTestSmtpServer, type TestSmtpServer } from '#test/smtp.ts';
import { ispHealthJob, nextState } from './isp-health.ts';

/** An ISP proxy: proxy-chain requiring user/pass, startable and stoppable on a fixed port. */
async function ispProxy(port = 0) {
  const server = new ProxyServer({
    port,
    host: '127.0.0.1',
    prepareRequestFunction: ({ username, password }) => ({
      requestAuthentication: username !== 'isp' || password !== 'isp-pass',
    }),
  });
  await server.listen();
  return { port: server.port, close: () => server.close(true) };
}

describe('server alerts', () => {
  let db: TestDatabase;
  let ctx: JobContext;
  let smtp: TestSmtpServer;
  let sender: Job;
  let job: Job;
  let origin: http.Server;
  let originStatus = 200;
  let hanging: net.Server;

  beforeAll(async () => {
    db = await createTestDatabase();
    ctx = { pool: db.pool, logger: createLogger('test', 'silent') };
    smtp = await startTestSmtpServer();
    sender = emailSenderJob({
      smtpUrl: smtp.url,
      from: 'proxyfleet <alerts@localhost>',
      logger: ctx.logger,
      registry: new Registry(),
    });
    origin = http.createServer((_req, res) => res.writeHead(originStatus).end('ok'));
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    // Accepts connections and never answers.
    hanging = net.createServer(() => undefined);
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', r));
    job = ispHealthJob({
      intervalSeconds: 60,
      url: `http://127.0.0.1:${(origin.address() as AddressInfo).port}/health`,
      credentialsKey: TEST_CREDENTIALS_KEY,
      connectTimeoutMs: 1_000,
      requestTimeoutMs: 1_500,
    });
  });
  afterAll(async () => {
    hanging.close();
    origin.closeAllConnections();
    origin.close();
    await smtp.close();
    await db.drop();
  });

  async function account(serverAlerts: boolean) {
    const a = await accountWithBandwidth(db.pool);
    await db.pool.query('UPDATE alert_settings SET server_alerts = $2 WHERE account_id = $1', [
      a.id,
      serverAlerts,
    ]);
    return a;
  }
  async function addProxy(accountId: string, port: number, password = 'isp-pass', username = 'isp') {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO isp_proxies (account_id, host, port, username, password_enc, country) VALUES ($1, '127.0.0.1', $2, $4, $3, 'us') RETURNING id`,
      [accountId, port, seal(TEST_CREDENTIALS_KEY, password), username],
    );
    return rows[0]!.id;
  }
  /** One pass of checks, as if the interval had elapsed for every proxy. */
  async function check() {
    await job.run(ctx); // enrols new proxies
    await db.pool.query('UPDATE isp_proxy_health SET next_check_at = now()');
    await job.run(ctx);
  }
  const health = async (id: string) =>
    (
      await db.pool.query<{ state: string; detail: string | null }>(
        'SELECT state, detail FROM isp_proxy_health WHERE proxy_id = $1',
        [id],
      )
    ).rows[0];
  async function mail(email: string) {
    await sender.run(ctx);
    return smtp.messages.filter((m) => addresses(m.to).includes(email)).map((m) => m.subject);
  }

  it('offline after two failed connects, recovered, error on 407 and on 5xx: one email per transition', async () => {
    const owner = await account(true);
    let proxy = await ispProxy();
    const port = proxy.port;
    const id = await addProxy(owner.id, port);
    const endpoint = `127.0.0.1:${port}`;

    await check();
    expect(await health(id)).toMatchObject({ state: 'online' });
    expect(await mail(owner.email)).toEqual([]);

    await proxy.close();
    await check();
    expect(await health(id)).toMatchObject({ state: 'online' }); // one failed connect is not offline
    await check();
    expect(await health(id)).toMatchObject({ state: 'offline' });
    await check();
    expect(await mail(owner.email)).toEqual([`Server ${endpoint} is offline`]);

    proxy = await ispProxy(port);
    await check();
    await check();
    expect(await health(id)).toMatchObject({ state: 'online' });
    const got = await mail(owner.email);
    expect(got).toEqual([`Server ${endpoint} is offline`, `Server ${endpoint} recovered`]);

    originStatus = 503;
    await check();
    await check();
    expect(await health(id)).toMatchObject({ state: 'error', detail: 'the proxied request failed with 503' });
    originStatus = 200;
    await check();
    await db.pool.query('UPDATE isp_proxies SET password_enc = $2 WHERE id = $1', [
      id,
      seal(TEST_CREDENTIALS_KEY, 'wrong'),
    ]);
    await check();
    expect(await health(id)).toMatchObject({
      state: 'error',
      detail: 'the proxy refused its credentials (407)',
    });
    expect(await mail(owner.email)).toEqual([
      `Server ${endpoint} is offline`,
      `Server ${endpoint} recovered`,
      `Server ${endpoint} reports an error`,
      `Server ${endpoint} recovered`,
      `Server ${endpoint} reports an error`,
    ]);
    const history = await db.pool.query<{ to_state: string }>(
      'SELECT to_state FROM isp_proxy_health_history WHERE proxy_id = $1 ORDER BY id',
      [id],
    );
    expect(history.rows.map((r) => r.to_state)).toEqual([
      'online',
      'offline',
      'online',
      'error',
      'online',
      'error',
    ]);
    await proxy.close();
  }, 60_000);

  it('a proxy that hangs is an error after the timeout and does not hold up the others; nothing for accounts with alerts off', async () => {
    const owner = await account(true);
    const quiet = await account(false);
    const good = await ispProxy();
    const stuck = await addProxy(owner.id, (hanging.address() as AddressInfo).port);
    const fine = await addProxy(owner.id, good.port);
    const ignored = await addProxy(quiet.id, good.port, 'isp-pass', 'other');
    await check();
    expect(await health(stuck)).toMatchObject({ state: 'error', detail: 'no answer within 1500 ms' });
    expect(await health(fine)).toMatchObject({ state: 'online' });
    expect(await health(ignored)).toBeUndefined();
    expect(await mail(owner.email)).toEqual([
      `Server 127.0.0.1:${(hanging.address() as AddressInfo).port} reports an error`,
    ]);
    expect(await mail(quiet.email)).toEqual([]);
    await good.close();
  }, 60_000);

  it("GET /api/v1/proxies/list shows each proxy's health", async () => {
    const api: TestApi = await startTestApi(db);
    try {
      const owner = await account(true);
      const good = await ispProxy();
      await addProxy(owner.id, good.port);
      const before = await call(api.url, '/api/v1/proxies/list', { key: owner.apiKey });
      expect(before.body.proxies[0].health).toEqual({ state: 'unchecked', checkedAt: null, since: null });
      await check();
      const after = await call(api.url, '/api/v1/proxies/list', { key: owner.apiKey });
      expect(after.body.proxies[0].health).toMatchObject({ state: 'online' });
      expect(typeof after.body.proxies[0].health.checkedAt).toBe('string');
      await good.close();
    } finally {
      await api.close();
    }
  }, 60_000);

  it('transitions', () => {
    expect(nextState('online', 0, { kind: 'connect-failed', detail: 'x' })).toEqual({
      state: 'online',
      connectFailures: 1,
      email: null,
    });
    expect(nextState('online', 1, { kind: 'connect-failed', detail: 'x' })).toEqual({
      state: 'offline',
      connectFailures: 2,
      email: 'offline',
    });
    expect(nextState('offline', 2, { kind: 'connect-failed', detail: 'x' })).toEqual({
      state: 'offline',
      connectFailures: 3,
      email: null,
    });
    expect(nextState('offline', 5, { kind: 'ok' })).toEqual({
      state: 'online',
      connectFailures: 0,
      email: 'recovered',
    });
    expect(nextState('unknown', 0, { kind: 'ok' })).toEqual({
      state: 'online',
      connectFailures: 0,
      email: null,
    });
    expect(nextState('error', 0, { kind: 'error', detail: 'x' })).toEqual({
      state: 'error',
      connectFailures: 0,
      email: null,
    });
  });
});
