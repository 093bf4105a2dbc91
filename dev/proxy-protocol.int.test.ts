// `npm start` with PROXYFLEET_GATEWAY_PROXY_PROTOCOL and _TRUSTED_CIDRS (docs/adr/0102): every dev
// gateway reads the header of the trusted balancer (HAProxy, leaving from 127.0.0.9) and admits an
// allowlisted customer by the address it names; a connection without a header is closed unanswered.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { DEFAULT_ALLOWLIST_MAX } from '#common/ip-allowlist.ts';
import { addAllowlistEntry } from '#api/modules/ip-allowlist/repo.ts';
import { allowlistCreate } from '#api/modules/ip-allowlist/schemas.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_ADMIN_TOKEN, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { get, rawExchange } from '#test/gateway/client.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { startHaproxy, type Haproxy } from '#test/haproxy.ts';
import { freePort } from '#test/ports.ts';
import { writeDevGateways } from '#test/dev-gateways.ts';
import { startEntrypoint, stopProcess, until, waitForHttp, type RunningProcess } from '#test/process.ts';

const BALANCER = '127.0.0.9';
const CUSTOMER = '127.41.1.7';

describe('npm start with the PROXY protocol required', () => {
  let proc: RunningProcess | undefined;
  let db: TestDatabase | undefined;
  let origin: Origin | undefined;
  let haproxy: Haproxy | undefined;
  let dataDir: string | undefined;
  afterAll(async () => {
    await haproxy?.stop();
    await stopProcess(proc);
    await origin?.close();
    await db?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('serves an allowlisted customer through HAProxy by its own address on every gateway; without a header, nothing', async () => {
    db = await createTestDatabase();
    origin = await startOrigin();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'pf-dev-proxy-protocol-'));
    const [apiPort, basicPort, advancedPort] = [await freePort(), await freePort(), await freePort()];
    const gateways = await writeDevGateways(
      dataDir,
      [
        { plan: 'basic', port: basicPort },
        { plan: 'advanced', port: advancedPort },
      ],
      'localhost',
    );
    const account = await accountWithBandwidth(db.pool, { basic: 1e9, advanced: 1e9 });
    for (const product of ['basic', 'advanced'])
      await addAllowlistEntry(
        db.pool,
        account.id,
        allowlistCreate(true).parse({ product, cidr: '127.41.1.0/24' }),
        DEFAULT_ALLOWLIST_MAX,
      );
    proc = startEntrypoint('dev/main.ts', {
      DATABASE_URL: db.url,
      PROXYFLEET_DATA_DIR: dataDir,
      PROXYFLEET_API_PORT: String(apiPort),
      PROXYFLEET_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      PROXYFLEET_CREDENTIALS_KEY: TEST_CREDENTIALS_KEY.toString('hex'),
      PROXYFLEET_DEV_GATEWAYS: gateways,
      PROXYFLEET_GATEWAY_ALLOW_CIDRS: '127.0.0.1/32',
      PROXYFLEET_GATEWAY_PROXY_PROTOCOL: 'required',
      PROXYFLEET_GATEWAY_PROXY_PROTOCOL_TRUSTED_CIDRS: `${BALANCER}/32`,
    });
    await waitForHttp(`http://127.0.0.1:${apiPort}/readyz`, 200, 60_000);
    haproxy = await startHaproxy(
      [
        { backendPort: basicPort, proxy: 2 },
        { backendPort: advancedPort, proxy: 1 },
      ],
      BALANCER,
    );
    const status = async (port: number, from: string) => {
      try {
        const { responses } = await rawExchange(port, [get(`http://127.0.0.1:${origin!.port}/peer`)], {
          sourceAddress: from,
        });
        return responses[0]!.status;
      } catch {
        return 0;
      }
    };
    for (const front of haproxy.ports)
      await until(
        async () => (await status(front, CUSTOMER)) === 200,
        'the allowlisted customer through HAProxy',
        30_000,
      );
    // Straight to the gateways, from the trusted address and from the customer's: no header, closed.
    for (const port of [basicPort, advancedPort]) {
      expect(await status(port, BALANCER)).toBe(0);
      expect(await status(port, CUSTOMER)).toBe(0);
    }
  }, 180_000);
});
