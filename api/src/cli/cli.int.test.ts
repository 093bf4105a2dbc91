import { describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { exampleEmail, TEST_ADMIN_TOKEN } from '#test/fixtures.ts';
import { call } from '#test/api.ts';
import { runCapturedCli, useCli } from '#test/cli.ts';

const { fx, cli } = useCli();
const json = (r: { out: string }) => JSON.parse(r.out) as Record<string, unknown>;

describe('proxyfleet admin', () => {
  test("usage targets and target-stats: the day asked for, a bad date refused with the API's message", async () => {
    const account = json(await cli('admin', 'accounts', 'create', '--email', exampleEmail())) as {
      id: string;
    };
    const today = new Date().toISOString().slice(0, 10);
    await fx.db.pool.query('SELECT target_usage_record($1::jsonb, 200)', [
      JSON.stringify([
        {
          account_id: account.id,
          product: 'basic',
          day: today,
          domain: 'example.com',
          bytes: 42,
          requests: 2,
        },
      ]),
    ]);
    expect(json(await cli('admin', 'usage', 'targets', account.id, '--date', today))).toEqual({
      success: true,
      date: today,
      enabled: true,
      targets: [{ domain: 'example.com', product: 'basic', bytes: 42, requests: 2 }],
    });
    expect(await cli('admin', 'usage', 'targets', account.id, '--date', '2020-01-01')).toMatchObject({
      code: 1,
      err: expect.stringContaining('date: must be within the last 30 days'),
    });
    expect(json(await cli('admin', 'target-stats', 'set', account.id, '--enabled', 'off'))).toEqual({
      enabled: false,
    });
    expect(json(await cli('admin', 'usage', 'targets', account.id))).toMatchObject({
      enabled: false,
      targets: [],
    });
  });

  test("throttle set: a cap, none, and a bad value refused with the API's or the usage message", async () => {
    const account = json(await cli('admin', 'accounts', 'create', '--email', exampleEmail())) as {
      id: string;
    };
    expect(json(await cli('admin', 'throttle', 'set', account.id, 'basic', '524288'))).toEqual({
      product: 'basic',
      bytesPerSecond: 524288,
    });
    expect(json(await cli('admin', 'accounts', 'get', account.id)).throttles).toEqual([
      { product: 'basic', bytesPerSecond: 524288 },
    ]);
    expect(json(await cli('admin', 'throttle', 'set', account.id, 'basic', 'none'))).toEqual({
      product: 'basic',
      bytesPerSecond: null,
    });
    expect(await cli('admin', 'throttle', 'set', account.id, 'basic', '1000')).toMatchObject({
      code: 1,
      err: expect.stringContaining('bytesPerSecond: must be at least 65536'),
    });
    expect(await cli('admin', 'throttle', 'set', account.id, 'basic', 'fast')).toMatchObject({ code: 2 });
  });

  test('wraps the admin API: account, purchase, keys, suspension, alerts, ISP proxies', async () => {
    const account = json(await cli('admin', 'accounts', 'create', '--email', exampleEmail())) as {
      id: string;
      apiKey: string;
    };
    expect(account.apiKey).toMatch(/^svc_live_/);
    expect(
      json(await cli('admin', 'purchases', 'create', account.id, '--product', 'basic', '--gb', '0.25')),
    ).toMatchObject({ bytes: 250_000_000 });
    const key = json(await cli('admin', 'keys', 'create', account.id, '--name', 'ci')) as {
      id: string;
      apiKey: string;
    };
    expect((await call(fx.api.url, '/api/v1/usage', { key: key.apiKey })).status).toBe(200);
    expect(await cli('admin', 'keys', 'revoke', account.id, key.id)).toMatchObject({
      code: 0,
      out: 'done\n',
    });
    expect((await call(fx.api.url, '/api/v1/usage', { key: key.apiKey })).status).toBe(401);
    const rotated = json(await cli('admin', 'keys', 'regenerate-primary', account.id)) as { apiKey: string };
    expect(rotated.apiKey).not.toBe(account.apiKey);
    expect(json(await cli('admin', 'accounts', 'suspend', account.id))).toEqual({
      id: account.id,
      status: 'suspended',
    });
    expect(json(await cli('admin', 'accounts', 'reactivate', account.id))).toEqual({
      id: account.id,
      status: 'active',
    });
    expect(json(await cli('admin', 'alerts', 'set', account.id, '--server-alerts', 'on'))).toMatchObject({
      serverAlerts: true,
      lowBandwidth: true,
    });
    expect(
      json(
        await cli(
          'admin',
          'isp-proxies',
          'add',
          account.id,
          '--host',
          '192.0.2.1',
          '--port',
          '8080',
          '--username',
          'u1',
          '--country',
          'us',
        ),
      ),
    ).toMatchObject({ host: '192.0.2.1' });
    expect(
      (json(await cli('admin', 'isp-proxies', 'list', account.id)) as { proxies: unknown[] }).proxies,
    ).toHaveLength(1);
    const invite = json(await cli('admin', 'accounts', 'invite', account.id)) as {
      url: string;
      expiresAt: string;
    };
    expect(invite.url).toMatch(/\/set-password\?token=[A-Za-z0-9_-]{43}$/);
    expect((await fetch(invite.url)).status).toBe(200);
  });

  test("credit-limit set and show: an amount, default, and a bad amount refused with the API's message", async () => {
    const account = json(await cli('admin', 'accounts', 'create', '--email', exampleEmail())) as {
      id: string;
    };
    expect(json(await cli('admin', 'credit-limit', 'set', account.id, '2500'))).toMatchObject({
      limit: 2500,
      default: false,
    });
    expect(json(await cli('admin', 'credit-limit', 'show', account.id))).toMatchObject({ limit: 2500 });
    expect(json(await cli('admin', 'credit-limit', 'set', account.id, 'default'))).toMatchObject({
      limit: 1000,
      default: true,
    });
    expect(await cli('admin', 'credit-limit', 'set', account.id, '12.345')).toMatchObject({
      code: 1,
      err: expect.stringContaining('limit: must have at most two decimals'),
    });
  });

  test("allowlist add, list and remove; a range too wide refused with the API's message", async () => {
    const account = json(await cli('admin', 'accounts', 'create', '--email', exampleEmail())) as {
      id: string;
    };
    const added = json(
      await cli(
        'admin',
        'allowlist',
        'add',
        account.id,
        'basic',
        '--cidr',
        '198.51.100.0/24',
        '--targeting',
        'country-de',
      ),
    );
    expect(added).toMatchObject({ product: 'basic', cidr: '198.51.100.0/24', targeting: 'country-de' });
    expect(json(await cli('admin', 'allowlist', 'list', account.id))).toMatchObject({
      entries: [{ id: added.id, cidr: '198.51.100.0/24' }],
      limit: 20,
    });
    expect(
      await cli('admin', 'allowlist', 'add', account.id, 'basic', '--cidr', '198.51.0.0/16'),
    ).toMatchObject({
      code: 1,
      err: expect.stringContaining('cidr: must be no wider than /24 for IPv4'),
    });
    expect(await cli('admin', 'allowlist', 'remove', account.id, String(added.id))).toMatchObject({
      code: 0,
    });
    expect(json(await cli('admin', 'allowlist', 'list', account.id))).toMatchObject({ entries: [] });
  });

  test("sub-users create, list, update, suspend, resume and delete; bad input refused with the API's or the usage message", async () => {
    const account = json(await cli('admin', 'accounts', 'create', '--email', exampleEmail())) as {
      id: string;
    };
    const made = json(
      await cli(
        'admin',
        'sub-users',
        'create',
        account.id,
        '--name',
        'Team A',
        '--max-connections',
        '20',
        '--limit',
        'basic=1.5',
        '--limit',
        'mobile=0',
      ),
    ) as { id: string; password: string; products: Record<string, { limitGb: number | null }> };
    expect(made).toMatchObject({
      name: 'Team A',
      status: 'active',
      maxConnections: 20,
      bytesPerSecond: null,
    });
    expect(made.products.basic!.limitGb).toBe(1.5);
    expect(made.products.mobile!.limitGb).toBe(0);
    expect(json(await cli('admin', 'sub-users', 'list', account.id))).toMatchObject({
      subUsers: [{ id: made.id, name: 'Team A' }],
      limit: 50,
    });
    const updated = json(
      await cli(
        'admin',
        'sub-users',
        'update',
        account.id,
        made.id,
        '--limit',
        'basic=none',
        '--bytes-per-second',
        '65536',
        '--max-connections',
        'none',
        '--reset-password',
      ),
    ) as typeof made;
    expect(updated).toMatchObject({ maxConnections: null, bytesPerSecond: 65536 });
    expect(updated.products.basic!.limitGb).toBeNull();
    expect(updated.products.mobile!.limitGb).toBe(0);
    expect(updated.password).not.toBe(made.password);
    expect(json(await cli('admin', 'sub-users', 'suspend', account.id, made.id))).toMatchObject({
      status: 'suspended',
    });
    expect(json(await cli('admin', 'sub-users', 'resume', account.id, made.id))).toMatchObject({
      status: 'active',
    });
    expect(
      await cli('admin', 'sub-users', 'update', account.id, made.id, '--bytes-per-second', '1000'),
    ).toMatchObject({ code: 1, err: expect.stringContaining('bytesPerSecond: must be at least 65536') });
    expect(
      await cli('admin', 'sub-users', 'create', account.id, '--name', 'x', '--limit', 'isp=1'),
    ).toMatchObject({
      code: 1,
      err: expect.stringContaining('trafficLimits.isp: unknown field'),
    });
    expect(
      (await cli('admin', 'sub-users', 'create', account.id, '--name', 'x', '--limit', 'basic')).code,
    ).toBe(2);
    expect((await cli('admin', 'sub-users', 'create', account.id)).code).toBe(2);
    expect(await cli('admin', 'sub-users', 'delete', account.id, made.id)).toMatchObject({ code: 0 });
    expect(await cli('admin', 'sub-users', 'delete', account.id, made.id)).toMatchObject({
      code: 1,
      err: 'error 404: Sub-user not found\n',
    });
    expect((await cli('admin', 'sub-users', '--help')).out).toContain(
      'sub-users create <accountId> --name <name>',
    );
  });

  test('API errors exit 1 with the message; usage errors exit 2', async () => {
    expect(await cli('admin', 'accounts', 'suspend', '00000000-0000-4000-8000-000000000000')).toMatchObject({
      code: 1,
      err: 'error 404: Account not found\n',
    });
    expect((await cli('admin', 'purchases', 'create', 'x', '--product', 'basic')).code).toBe(2);
    expect((await cli('admin', 'alerts', 'set', 'x', '--server-alerts', 'maybe')).code).toBe(2);
    expect((await cli('admin', 'nothing', 'here')).code).toBe(2);
    expect((await cli('admin', 'accounts', 'list', '--bogus')).code).toBe(2);
  });

  test('bin/proxyfleet.js admin --help runs', async () => {
    const bin = fileURLToPath(new URL('../../../bin/proxyfleet.js', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'admin', '--help']);
    expect(stdout).toContain('Usage: proxyfleet admin <command>');
    expect(stdout).toContain('keys revoke <accountId> <keyId>');
  });

  test('help at every level: the CLI, admin, a command group, a command', async () => {
    for (const argv of [['--help'], ['admin', '--help'], ['help']]) {
      const r = await cli(...argv);
      expect(r).toMatchObject({ code: 0 });
      expect(r.out).toContain('Usage: proxyfleet admin <command>');
    }
    for (const argv of [
      ['admin', 'accounts', '--help'],
      ['admin', 'accounts', '-h'],
      ['admin', 'accounts'],
      ['admin', 'help', 'accounts'],
    ]) {
      const r = await cli(...argv);
      expect(r).toMatchObject({ code: 0, err: '' });
      expect(r.out).toContain('Usage: proxyfleet admin accounts <command>');
      expect(r.out).toContain('accounts create --email <email>');
      expect(r.out).not.toContain('keys revoke');
    }
    const one = await cli('admin', 'accounts', 'create', '--help');
    expect(one).toMatchObject({ code: 0 });
    expect(one.out).toContain('Usage: proxyfleet admin accounts create --email <email>');
  });

  test('an unreachable API names the URL and what to do', async () => {
    const r = await runCapturedCli(['admin', 'accounts', 'list'], {
      PROXYFLEET_API_URL: 'http://127.0.0.1:9',
      PROXYFLEET_ADMIN_TOKEN: 'x'.repeat(24),
    });
    expect(r.code).toBe(1);
    expect(r.err).toContain('http://127.0.0.1:9');
    expect(r.err).toMatch(/npm start/);
    expect(r.err).toMatch(/PROXYFLEET_API_URL/);
    expect(r.err).not.toBe('error: fetch failed\n');
  });

  test('reads PROXYFLEET_API_PORT (and HOST) as npm start does, and the admin token of the data dir', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pf-cli-'));
    try {
      await writeFile(path.join(dataDir, 'admin-token'), `${TEST_ADMIN_TOKEN}\n`, { mode: 0o600 });
      const port = new URL(fx.api.url).port;
      const r = await runCapturedCli(['admin', 'accounts', 'list', '--limit', '1'], {
        PROXYFLEET_API_PORT: port,
        PROXYFLEET_DATA_DIR: dataDir,
      });
      expect(r).toMatchObject({ code: 0, err: '' });
      expect(JSON.parse(r.out)).toHaveProperty('accounts');
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
