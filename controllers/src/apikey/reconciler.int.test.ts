// ApiKey end to end: a real kube-apiserver, the operator as the chart's least-privileged user,
// PostgreSQL, and the REST API (api/src/server.ts) answering GET /api/v1/account with X-API-Key.
// A ChangeFeed acknowledging as component "gateway" stands in for a gateway pod's cache.
import { expect, test } from '@jest/globals';
import { createNamedKey } from '#common/accounts/keys.ts';
import { ChangeFeed } from '#common/db/changes.ts';
import { createLogger } from '#common/logger.ts';
import { call, startTestApi, type TestApi } from '#test/api.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { describeKube } from '#test/kube/describe-kube.ts';
import { eventually, RELEASE_NAMESPACE } from '#test/kube/env.ts';
import { useOperator } from '#test/kube/operator.ts';
import type { NewAccount } from '#common/accounts/accounts.ts';
import type { KubeObject } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { API_KEY, API_KEY_V1ALPHA1, PROXY_GATEWAY, PROXY_GATEWAY_V1ALPHA1 } from '../crds/resources.ts';
import type { ApiKey } from '../crds/types.generated.ts';

const NS = 'keys';

describeKube('ApiKey controller end to end (kube-apiserver, PostgreSQL, REST API)', () => {
  let api: TestApi;
  let gatewayCache: ChangeFeed;
  let account: NewAccount;

  const fx = useOperator({
    before: async ({ kube, db }) => {
      api = await startTestApi(db);
      gatewayCache = new ChangeFeed({
        url: db.url,
        logger: createLogger('gateway', 'silent'),
        component: 'gateway',
        heartbeatMs: 500,
        ack: { instance: 'gateway-test-0', component: 'gateway' },
      });
      await gatewayCache.start();
      account = await accountWithBandwidth(db.pool, { basic: 1e9 });
      await kube.apply(namespaceYaml(NS, account.id));
    },
    after: async () => {
      await gatewayCache?.close();
      await api?.close();
    },
  });

  /** A Namespace, bound to an account by its proxyfleet.io/account-id label when one is given. */
  const namespaceYaml = (name: string, accountId?: string) =>
    `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${name}\n` +
    (accountId ? `  labels:\n    proxyfleet.io/account-id: ${accountId}\n` : '');
  const applyKey = (name: string, spec: Record<string, unknown>, namespace = NS) =>
    fx.admin.apply(
      API_KEY_V1ALPHA1,
      {
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ApiKey',
        metadata: { name, namespace },
        spec,
      } as KubeObject,
      {
        fieldManager: 'test',
      },
    );
  const getKey = (name: string, namespace = NS) => fx.admin.get<ApiKey>(API_KEY, namespace, name);
  const secretKey = async (secretName: string, namespace = NS) => {
    const s = await fx.admin.get<KubeObject & { data?: Record<string, string> }>(
      RESOURCES.secret,
      namespace,
      secretName,
    );
    return s?.data?.apiKey ? Buffer.from(s.data.apiKey, 'base64').toString() : undefined;
  };
  const accountStatus = async (key: string) => (await call(api.url, '/api/v1/account', { key })).status;
  /** Waits until status reports every cache has the change made for `rotation` (and Ready as given). */
  const synced = (name: string, check: (ak: ApiKey) => boolean) =>
    eventually(
      async () => {
        const ak = await getKey(name);
        const cond = ak?.status?.conditions?.find((c) => c.type === 'Synced');
        return ak && cond?.status === 'True' && check(ak) ? ak : undefined;
      },
      20_000,
      `${name} synced`,
    );

  test('create: the key lands in the Secret, only its hash in api_keys, and it works on the REST API', async () => {
    await applyKey('ci', { accountId: account.id, name: 'ci', secretName: 'ci-api-key' });
    const ak = await synced(
      'ci',
      (a) => a.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    );
    const key = (await secretKey('ci-api-key'))!;
    expect(key).toMatch(/^svc_live_[0-9a-f]{48}$/);
    expect(await accountStatus(key)).toBe(200);
    const body = (await call(api.url, '/api/v1/account', { key })).body as { id: string };
    expect(body.id).toBe(account.id);

    const { rows } = await fx.db.pool.query(
      'SELECT id, kind, name, prefix, encode(key_hash, $2) AS hash FROM api_keys WHERE account_id = $1 AND name = $3',
      [account.id, 'hex', 'ci'],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ kind: 'named', prefix: key.slice(0, 15) });
    expect(ak.status).toMatchObject({
      keyId: rows[0].id,
      keyName: 'ci',
      prefix: key.slice(0, 15),
      fingerprint: `sha256:${String(rows[0].hash).slice(0, 16)}`,
      observedRotation: 0,
      observedGeneration: 1,
      apiPods: { synced: 1, total: 1 },
      gatewayPods: { synced: 1, total: 1 },
      synced: 'api 1/1, gw 1/1',
    });
    expect(ak.status?.lastRotationTime).toBeDefined();
    // The key never appears in the CR.
    expect(JSON.stringify(ak)).not.toContain(key);
  });

  test('rotate: raising spec.rotation replaces the key; once Synced the old one is refused everywhere', async () => {
    const oldKey = (await secretKey('ci-api-key'))!;
    const before = (await getKey('ci'))!;
    await applyKey('ci', { accountId: account.id, name: 'ci', secretName: 'ci-api-key', rotation: 1 });
    const ak = await synced('ci', (a) => a.status?.observedRotation === 1);
    const newKey = (await secretKey('ci-api-key'))!;
    expect(newKey).not.toBe(oldKey);
    expect(ak.status?.keyId).not.toBe(before.status?.keyId);
    expect(ak.status?.changeId).toBeGreaterThan(before.status!.changeId!);
    expect(await accountStatus(oldKey)).toBe(401);
    expect(await accountStatus(newKey)).toBe(200);
    const events = await fx.admin.list<KubeObject & { reason?: string; involvedObject?: { name: string } }>(
      RESOURCES.event,
      { namespace: NS },
    );
    expect(events.items.filter((e) => e.involvedObject?.name === 'ci').map((e) => e.reason)).toEqual(
      expect.arrayContaining(['KeyIssued', 'KeyRotated']),
    );
  });

  test('revoke: the key fails on the REST API, its Secret is gone, and revoked cannot be undone', async () => {
    const key = (await secretKey('ci-api-key'))!;
    await applyKey('ci', {
      accountId: account.id,
      name: 'ci',
      secretName: 'ci-api-key',
      rotation: 1,
      revoked: true,
    });
    const ak = await synced(
      'ci',
      (a) => a.status?.conditions?.some((c) => c.type === 'Ready' && c.reason === 'Revoked') ?? false,
    );
    expect(ak.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
    expect(await accountStatus(key)).toBe(401);
    expect(await secretKey('ci-api-key')).toBeUndefined();
    await expect(
      applyKey('ci', {
        accountId: account.id,
        name: 'ci',
        secretName: 'ci-api-key',
        rotation: 1,
        revoked: false,
      }),
    ).rejects.toThrow(/a revoked key stays revoked/);
    await expect(
      applyKey('ci', {
        accountId: account.id,
        name: 'ci',
        secretName: 'ci-api-key',
        rotation: 0,
        revoked: true,
      }),
    ).rejects.toThrow(/rotation only goes up/);
  });

  test('delete: the finalizer revokes the key before the ApiKey goes', async () => {
    await applyKey('temp', { accountId: account.id, name: 'temp', secretName: 'temp-api-key' });
    await synced(
      'temp',
      (a) => a.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    );
    const key = (await secretKey('temp-api-key'))!;
    expect(await accountStatus(key)).toBe(200);
    expect((await getKey('temp'))?.metadata.finalizers).toEqual(['proxyfleet.io/api-key']);
    await fx.admin.delete(API_KEY, NS, 'temp');
    await eventually(async () => (await getKey('temp')) === undefined, 20_000, 'ApiKey deleted');
    await eventually(async () => (await accountStatus(key)) === 401, 10_000, 'key refused');
    expect(await secretKey('temp-api-key')).toBeUndefined();
    const { rows } = await fx.db.pool.query(
      "SELECT count(*)::int AS n FROM operator_api_keys WHERE name = 'temp'",
    );
    expect(rows[0].n).toBe(0);
  });

  test('primary: the ApiKey regenerates the account primary key, the one issued at sign-up stops working', async () => {
    expect(await accountStatus(account.apiKey)).toBe(200);
    await applyKey('primary', { accountId: account.id, primary: true, secretName: 'primary-api-key' });
    await synced(
      'primary',
      (a) => a.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false,
    );
    const key = (await secretKey('primary-api-key'))!;
    expect(await accountStatus(key)).toBe(200);
    expect(await accountStatus(account.apiKey)).toBe(401);
    expect((await getKey('primary'))?.status?.keyName).toBe('primary');
  });

  test('an ApiKey in a namespace not bound to the account never touches its keys', async () => {
    const keysOf = async () =>
      (
        await fx.db.pool.query(
          'SELECT id, kind, name, encode(key_hash, $2) AS hash, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY id',
          [account.id, 'hex'],
        )
      ).rows;
    const before = await keysOf();
    const attacker = await accountWithBandwidth(fx.db.pool);
    // One namespace with no binding, one bound to the attacker's own account.
    await fx.kube.apply(namespaceYaml('intruder'));
    await fx.kube.apply(namespaceYaml('intruder-bound', attacker.id));
    for (const ns of ['intruder', 'intruder-bound']) {
      await applyKey('steal', { accountId: account.id, primary: true, secretName: 'stolen' }, ns);
      await applyKey(
        'steal-named',
        { accountId: account.id, name: 'stolen', secretName: 'stolen-named' },
        ns,
      );
    }
    for (const ns of ['intruder', 'intruder-bound']) {
      for (const name of ['steal', 'steal-named']) {
        const ready = await eventually(
          async () => (await getKey(name, ns))?.status?.conditions?.find((c) => c.type === 'Ready'),
          20_000,
          `${ns}/${name} Ready`,
        );
        expect(ready).toMatchObject({ status: 'False', reason: 'AccountNotBoundToNamespace' });
        const ak = (await getKey(name, ns))!;
        expect(ak.metadata.finalizers ?? []).toEqual([]);
        expect(ak.status?.keyId).toBeUndefined();
      }
      expect(await secretKey('stolen', ns)).toBeUndefined();
      expect(await secretKey('stolen-named', ns)).toBeUndefined();
    }
    expect(await keysOf()).toEqual(before);
    const { rows } = await fx.db.pool.query(
      "SELECT count(*)::int AS n FROM operator_api_keys WHERE namespace LIKE 'intruder%'",
    );
    expect(rows[0].n).toBe(0);
    const events = await fx.admin.list<KubeObject & { reason?: string }>(RESOURCES.event, {
      namespace: 'intruder',
    });
    expect(events.items.map((e) => e.reason)).toContain('AccountNotBoundToNamespace');
  });

  test("the 10-named-key limit surfaces as Ready=False, reason NamedKeyLimit (in the operator's namespace, any account)", async () => {
    const other = await accountWithBandwidth(fx.db.pool);
    for (let i = 0; i < 10; i++) await createNamedKey(fx.db.pool, other.id, `k${i}`);
    await applyKey(
      'eleventh',
      { accountId: other.id, name: 'eleventh', secretName: 'eleventh-api-key' },
      RELEASE_NAMESPACE,
    );
    const ready = await eventually(
      async () =>
        (await getKey('eleventh', RELEASE_NAMESPACE))?.status?.conditions?.find((c) => c.type === 'Ready'),
      20_000,
      'Ready',
    );
    expect(ready).toMatchObject({ status: 'False', reason: 'NamedKeyLimit' });
    expect(ready.message).toMatch(/at most 10 named API keys/);
  });

  test('invalid ApiKeys are rejected by the schema and CEL', async () => {
    await expect(applyKey('bad', { accountId: 'not-a-uuid', name: 'x', secretName: 's' })).rejects.toThrow(
      /accountId/,
    );
    await expect(applyKey('bad', { accountId: account.id, secretName: 's' })).rejects.toThrow(
      /needs spec.name/,
    );
    await expect(
      applyKey('bad', { accountId: account.id, primary: true, name: 'x', secretName: 's' }),
    ).rejects.toThrow(/primary key has no spec.name/);
    await expect(
      applyKey('primary', { accountId: account.id, primary: true, secretName: 'other-secret' }),
    ).rejects.toThrow(/secretName is immutable/);
  });

  test('kubectl get pgw,ak prints the printer columns with real values', async () => {
    await fx.admin.apply(
      PROXY_GATEWAY_V1ALPHA1,
      {
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ProxyGateway',
        metadata: { name: 'basic', namespace: NS },
        spec: {
          plan: 'basic',
          port: 12321,
          advertisedHost: 'basic.proxy.example.com',
          exits: [{ name: 'direct', country: '*' }],
          replicas: { min: 2, max: 2 },
        },
      } as KubeObject,
      { fieldManager: 'test' },
    );
    await eventually(
      async () =>
        (await fx.admin.get<KubeObject & { status?: { ready?: string } }>(PROXY_GATEWAY, NS, 'basic'))?.status
          ?.ready === '0/2',
    );
    const table = await fx.kube.kubectl(['get', 'pgw,ak', '-n', NS]);
    const lines = table.split('\n').map((l) => l.trim().split(/\s{2,}/));
    const pgwHeader = lines.find((l) => l[1] === 'PLAN');
    // PAUSED is empty (it never was), so the split on wide gaps folds it away in the rows.
    expect(pgwHeader).toEqual([
      'NAME',
      'PLAN',
      'PORT',
      'READY',
      'EXITS',
      'STATUS',
      'PAUSED',
      'ENDPOINT',
      'AGE',
    ]);
    // EXITS: exits working on some pod out of all, from the pods' heartbeats (none here).
    expect(lines.find((l) => l[0] === 'proxygateway.proxyfleet.io/basic')?.slice(1, 7)).toEqual([
      'basic',
      '12321',
      '0/2',
      '0/1',
      'NoReadyPods',
      'basic.proxy.example.com:12321',
    ]);
    // One NAME column; READY and its reason from the Ready condition (docs/adr/0031).
    const akHeader = lines.find((l) => l[1] === 'ACCOUNT');
    expect(akHeader).toEqual(['NAME', 'ACCOUNT', 'KEY', 'READY', 'REASON', 'PAUSED', 'REVOKED', 'AGE']);
    expect(lines.find((l) => l[0] === 'apikey.proxyfleet.io/ci')?.slice(1, 6)).toEqual([
      account.id,
      'ci',
      'False',
      'Revoked',
      'true',
    ]);
    expect(lines.find((l) => l[0] === 'apikey.proxyfleet.io/primary')?.slice(1, 6)).toEqual([
      account.id,
      'primary',
      'True',
      'KeyActive',
      'false',
    ]);
    // The cache counts (once a misleading SYNCED column) are in -o wide, named for what they are.
    const wide = (await fx.kube.kubectl(['get', 'ak', '-n', NS, '-o', 'wide']))
      .split('\n')
      .map((l) => l.trim().split(/\s{2,}/));
    expect(wide[0]).toEqual([
      'NAME',
      'ACCOUNT',
      'KEY',
      'READY',
      'REASON',
      'PAUSED',
      'TYPE', // v1beta1's column, kubectl's preferred version (v1alpha1 shows PRIMARY)
      'REVOKED',
      'CACHES',
      'AGE',
    ]);
    // The empty PAUSED cell collapses in the split: TYPE is the 6th cell of a row.
    expect(wide.find((l) => l[0] === 'primary')?.[5]).toBe('Primary');
    expect(wide.find((l) => l[0] === 'primary')?.[7]).toBe('api 1/1, gw 1/1');
    const alphaWide = (
      await fx.kube.kubectl(['get', 'apikeys.v1alpha1.proxyfleet.io', '-n', NS, '-o', 'wide'])
    )
      .split('\n')
      .map((l) => l.trim().split(/\s{2,}/));
    expect(alphaWide[0]![6]).toBe('PRIMARY');
    expect(alphaWide.find((l) => l[0] === 'primary')?.[5]).toBe('true');
    process.stdout.write(`kubectl get pgw,ak -n ${NS}\n${table}`);
  });
});
