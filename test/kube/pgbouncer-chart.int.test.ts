// The chart's optional PgBouncer and the URLs behind a transaction pooler (docs/adr/0068): the
// API server accepts what it renders, every entrypoint's configuration loads from the rendered
// environment, bad combinations fail at `helm template`, and the rendered PgBouncer configuration
// runs in the real PgBouncer (Debian's) in front of the test database: a client logs in with the
// Secret's password, the transaction pool's server connections carry the statement timeout, the
// session pool keeps LISTEN.
import { execFile } from 'node:child_process';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import pg from 'pg';
import { loadApiConfig } from '#api/config.ts';
import { loadControllerConfig } from '../../controllers/src/config.ts';
import { loadWorkerConfig } from '../../worker/src/config.ts';
import { createTestDatabase, type TestDatabase } from '../db.ts';
import { PgBouncer } from '../pgbouncer.ts';
import { serverUser } from '../run-as.ts';
import { describeKube } from './describe-kube.ts';
import { helmTemplate, helmTemplateText, RELEASE_NAMESPACE, startKube, type KubeEnv } from './env.ts';

const run = promisify(execFile);
type Env = { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } };
type Doc = {
  kind: string;
  metadata: { name: string };
  data?: Record<string, string>;
  spec?: { template: { spec: { containers: { name: string; env?: Env[] }[] } } };
};

const POOLED = [
  '--set',
  'database.pooling=transaction',
  '--set',
  'database.url=postgresql://proxyfleet:secret@proxyfleet-pgbouncer.proxyfleet-system.svc:6432/proxyfleet',
  '--set',
  'database.sessionUrl=postgresql://proxyfleet:secret@proxyfleet-pgbouncer.proxyfleet-system.svc:6432/proxyfleet_session',
  '--set',
  'pgbouncer.enabled=true',
  '--set',
  'pgbouncer.server.existingSecret=proxyfleet-db-login',
];

describeKube('Helm chart: PgBouncer and the session URL', () => {
  let kube: KubeEnv;
  let db: TestDatabase;

  beforeAll(async () => {
    [kube, db] = await Promise.all([startKube(), createTestDatabase()]);
  }, 120_000);
  afterAll(async () => {
    await kube?.stop();
    await db?.drop();
  });

  test('the API server accepts every object; each entrypoint loads its configuration from the rendered env', async () => {
    const args = [...POOLED, '--set', 'pgbouncer.server.host=postgres-rw.proxyfleet-system.svc'];
    const out = await kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '--force-conflicts', '-n', RELEASE_NAMESPACE, '-f', '-'],
      { input: await helmTemplateText(args) },
    );
    expect(out).toMatch(/deployment.apps\/proxyfleet-pgbouncer serverside-applied \(server dry run\)/);
    expect(out).toMatch(/service\/proxyfleet-pgbouncer serverside-applied \(server dry run\)/);
    const docs = (await helmTemplate(args)) as Doc[];
    const secret = docs.find(
      (d) => d.kind === 'Secret' && d.metadata.name === 'proxyfleet-database',
    ) as unknown as {
      stringData: Record<string, string>;
    };
    const envOf = (name: string) => {
      const env = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === name)!.spec!.template.spec
        .containers[0]!.env!;
      // Secret references resolved as the kubelet would; other references get stand-ins.
      return Object.fromEntries(
        env.map((e) => [
          e.name,
          e.value ?? (e.valueFrom?.secretKeyRef ? secret.stringData[e.valueFrom.secretKeyRef.key] : 'x'),
        ]),
      );
    };
    const api = loadApiConfig({
      ...envOf('proxyfleet-api'),
      PROXYFLEET_ADMIN_TOKEN: 'a'.repeat(32),
      PROXYFLEET_CREDENTIALS_KEY: '0'.repeat(64),
    });
    expect(api.PROXYFLEET_DB_POOLING).toBe('transaction');
    expect(api.PROXYFLEET_DATABASE_SESSION_URL).toMatch(/\/proxyfleet_session$/);
    expect(loadWorkerConfig(envOf('proxyfleet-worker')).PROXYFLEET_DATABASE_SESSION_URL).toMatch(/_session$/);
    const controller = loadControllerConfig(envOf('proxyfleet-controller'));
    expect(controller.PROXYFLEET_GATEWAY_DATABASE_SESSION_SECRET_KEY).toBe('sessionUrl');
    expect(controller.PROXYFLEET_GATEWAY_DB_POOLING).toBe('transaction');
    // Without the pooler nothing changes: no session URL, no pooling mode.
    const plain = (await helmTemplate()) as Doc[];
    const apiEnv = plain.find((d) => d.metadata.name === 'proxyfleet-api' && d.kind === 'Deployment')!.spec!
      .template.spec.containers[0]!.env!;
    expect(apiEnv.map((e) => e.name)).not.toContain('PROXYFLEET_DATABASE_SESSION_URL');
    expect(plain.map((d) => d.metadata.name)).not.toContain('proxyfleet-pgbouncer');
  });

  test('helm template refuses a transaction pooler without a session URL, and PgBouncer without its server', async () => {
    await expect(helmTemplateText(['--set', 'database.pooling=transaction'])).rejects.toThrow(
      /database.pooling=transaction needs a session URL/,
    );
    await expect(helmTemplateText(POOLED)).rejects.toThrow(/pgbouncer.enabled needs pgbouncer.server.host/);
    await expect(
      helmTemplateText([
        '--set',
        'pgbouncer.enabled=true',
        '--set',
        'pgbouncer.server.host=db',
        '--set',
        'pgbouncer.server.existingSecret=s',
      ]),
    ).rejects.toThrow(/set database.pooling=transaction/);
    await expect(helmTemplateText(['--set', 'pgbouncer.poolsize=3'])).rejects.toThrow(
      /additional properties 'poolsize' not allowed/,
    );
  });

  test('the rendered PgBouncer configuration runs in front of a database: login, both pools, the statement timeout', async () => {
    const server = new URL(db.url);
    const docs = (await helmTemplate([
      ...POOLED,
      '--set',
      `pgbouncer.server.host=${server.hostname}`,
      '--set',
      `pgbouncer.server.port=${server.port || 5432}`,
      '--set',
      `pgbouncer.server.database=${server.pathname.slice(1)}`,
    ])) as Doc[];
    const data = docs.find(
      (d) => d.kind === 'ConfigMap' && d.metadata.name === 'proxyfleet-pgbouncer',
    )!.data!;
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-chart-pgbouncer-'));
    let bouncer: PgBouncer | undefined;
    try {
      // The init container's script, as the pod runs it: the login from the Secret into the auth file.
      // The server's own login (the embedded server's password), or one with a quote and a space
      // when the server trusts 127.0.0.1 (the auth file's syntax doubles the quote).
      const login = decodeURIComponent(server.username || 'postgres');
      const password = decodeURIComponent(server.password) || 'se"cret pass';
      await writeFile(path.join(dir, 'users.sh'), data['users.sh']!);
      await run('sh', [path.join(dir, 'users.sh')], {
        env: {
          PATH: process.env.PATH,
          PGBOUNCER_CONFIG_DIR: dir,
          PGBOUNCER_USER: login,
          PGBOUNCER_PASSWORD: password,
        },
      });
      const user = serverUser();
      if (user) await chown(path.join(dir, 'users.txt'), user.uid, user.gid);
      bouncer = await PgBouncer.start({
        serverUrl: db.url,
        pools: {},
        dir,
        // The chart's file, on a free local port, with the auth file where the script wrote it.
        config: (port) =>
          data['pgbouncer.ini']!.replace('listen_addr = 0.0.0.0', 'listen_addr = 127.0.0.1')
            .replace('listen_port = 6432', `listen_port = ${port}`)
            .replace('auth_file = /config/users.txt', `auth_file = ${dir}/users.txt`),
      });
      const port = bouncer.port;
      const connect = async (database: string, pass: string) => {
        const client = new pg.Client({
          host: '127.0.0.1',
          port,
          user: login,
          password: pass,
          database,
        });
        client.on('error', () => undefined);
        await client.connect();
        return client;
      };
      await expect(connect('proxyfleet', 'wrong')).rejects.toThrow(/password authentication failed|SASL/);
      const pooled = await connect('proxyfleet', password);
      const { rows } = await pooled.query<{ ms: string }>(
        "SELECT setting AS ms FROM pg_settings WHERE name = 'statement_timeout'",
      );
      expect(rows[0]!.ms).toBe('15000');
      await pooled.end();
      const session = await connect('proxyfleet_session', password);
      const heard = new Promise<string | undefined>((resolve) =>
        session.once('notification', (n) => resolve(n.payload)),
      );
      await session.query('LISTEN chart_test');
      const other = await connect('proxyfleet', password);
      await other.query("SELECT pg_notify('chart_test', 'through the session pool')");
      expect(await heard).toBe('through the session pool');
      await Promise.all([session.end(), other.end()]);
    } finally {
      await bouncer?.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
