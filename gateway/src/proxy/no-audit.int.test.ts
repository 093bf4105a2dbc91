// The gateways' per-request path writes nothing to the audit log (docs/security.md "Audit log"):
// requests accepted and refused, their leases, flushes and the usage fold leave audit_log as it
// was. Only an auto-refill a lease draw sets off is recorded, once per threshold crossing
// (api/src/modules/audit-log/audit-log.int.test.ts, common/src/billing/refills-audit.int.test.ts).
import { beforeAll, expect, it } from '@jest/globals';
import type { NewAccount } from '#common/accounts/accounts.ts';
import { accountWithBandwidth } from '#test/fixtures.ts';
import { gatewaySpec, useTestGateway, type TestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get, rawExchange } from '#test/gateway/client.ts';
import { fold, recordedUsage } from '#test/gateway/usage.ts';

let account: NewAccount;
let gateway: TestGateway;
const fx = useTestGateway({ gateway: false });

beforeAll(async () => {
  account = await accountWithBandwidth(fx.db.pool, { basic: 1_000_000_000 });
  gateway = await fx.start(gatewaySpec('basic'));
});

const auditRows = async () =>
  (await fx.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log')).rows[0]!.n;

it('writes no audit entry for requests, refusals, leases, flushes or the fold', async () => {
  const before = await auditRows();
  const url = `http://127.0.0.1:${fx.origin.port}/bytes/20000`;
  const good = basicAuth(account.proxyUsername, `${account.proxyPassword}_country-us`);
  const wrong = basicAuth(account.proxyUsername, 'not-the-password');
  let ok = 0;
  for (let i = 0; i < 10; i++) {
    const { responses } = await rawExchange(gateway.port, [get(url, good), get(url, good), get(url, good)]);
    ok += responses.filter((r) => r.status === 200).length;
  }
  const refused = await rawExchange(gateway.port, [get(url, wrong)]);
  expect(refused.responses[0]!.status).toBe(407);
  await gateway.ledger.flushSettled();
  await fold(fx.db.pool);
  expect(ok).toBe(30);
  expect(Number((await recordedUsage(fx.db.pool, account.id)).requests)).toBeGreaterThanOrEqual(30);
  expect(await auditRows()).toBe(before);
});
