// `npm start` with PROXYFLEET_GATEWAY_TLS_CERT/_KEY (docs/adr/0083): its gateways answer a TLS
// handshake on their port (ALPN http/1.1, the configured certificate), register tls in
// gateway_endpoints, and the https:// URL the API then generates works with curl. Started again
// without the pair, the endpoint says no TLS and the API refuses the https:// form (409).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from '@jest/globals';
import { call } from '#test/api.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import { accountWithBandwidth, TEST_ADMIN_TOKEN, TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { startOrigin, type Origin } from '#test/gateway/origin.ts';
import { freePort } from '#test/ports.ts';
import { writeDevGateways } from '#test/dev-gateways.ts';
import { startEntrypoint, stopProcess, until, waitForHttp, type RunningProcess } from '#test/process.ts';
import { createTestCa, type TestCa } from '#test/tls.ts';

const run = promisify(execFile);
const DEBIAN_PYTHON = '/usr/bin/python3';
/** docs/gateway.md's urllib3 example with a private CA (for the TLS to the proxy, both are needed). */
const PYTHON_CLIENT = [
  'import ssl, sys, urllib3',
  'url, ca, target = sys.argv[1:4]',
  'proxy = urllib3.util.parse_url(url)',
  'manager = urllib3.ProxyManager(url, proxy_headers=urllib3.make_headers(proxy_basic_auth=proxy.auth),',
  '    proxy_ssl_context=ssl.create_default_context(cafile=ca), ca_certs=ca)',
  "answer = manager.request('GET', target, retries=False)",
  'print(answer.status, answer.data.decode())',
].join('\n');

/** The handshake a client makes: the CA trusted, 127.0.0.1 checked, http/1.1 offered. */
function handshake(port: number, ca: Buffer): Promise<{ alpn: string | false; subject: unknown }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca, ALPNProtocols: ['http/1.1'] }, () => {
      const result = { alpn: socket.alpnProtocol ?? false, subject: socket.getPeerCertificate().subject.CN };
      socket.end();
      resolve(result);
    });
    socket.on('error', reject);
  });
}

describe('npm start with a gateway certificate', () => {
  let proc: RunningProcess | undefined;
  let db: TestDatabase | undefined;
  let ca: TestCa | undefined;
  let origin: Origin | undefined;
  let dataDir: string | undefined;
  afterAll(async () => {
    await stopProcess(proc);
    await origin?.close();
    await ca?.remove();
    await db?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('serves TLS on the gateway port, registers tls=true, and the generated https:// URL works; without the pair tls=false and 409', async () => {
    db = await createTestDatabase();
    ca = await createTestCa();
    const leaf = await ca.issue('dev-gateway');
    origin = await startOrigin();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'pf-dev-tls-'));
    const [apiPort, gatewayPort] = [await freePort(), await freePort()];
    const gateways = await writeDevGateways(dataDir, [{ plan: 'basic', port: gatewayPort }], 'localhost');
    const env = (withTls: boolean) => ({
      DATABASE_URL: db!.url,
      PROXYFLEET_DATA_DIR: dataDir,
      PROXYFLEET_API_PORT: String(apiPort),
      PROXYFLEET_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      PROXYFLEET_CREDENTIALS_KEY: TEST_CREDENTIALS_KEY.toString('hex'),
      PROXYFLEET_DEV_GATEWAYS: gateways,
      PROXYFLEET_GATEWAY_ALLOW_CIDRS: '127.0.0.1/32',
      ...(withTls
        ? { PROXYFLEET_GATEWAY_TLS_CERT: leaf.certFile, PROXYFLEET_GATEWAY_TLS_KEY: leaf.keyFile }
        : {}),
    });
    const endpointTls = async () =>
      (await db!.pool.query<{ tls: boolean }>("SELECT tls FROM gateway_endpoints WHERE plan = 'basic'"))
        .rows[0]?.tls;
    const account = await accountWithBandwidth(db.pool, { basic: 1e9 });
    const generate = () =>
      call(`http://127.0.0.1:${apiPort}`, '/api/v1/proxies/generate', {
        key: account.apiKey,
        body: { provider: 'basic', country: 'us', sessionType: 'rotating', scheme: 'https' },
      });

    proc = startEntrypoint('dev/main.ts', env(true));
    await waitForHttp(`http://127.0.0.1:${apiPort}/readyz`, 200, 60_000);
    expect(await proc.waitForLog('proxyfleet dev is up')).toMatchObject({ gatewayTls: true });
    expect(await handshake(gatewayPort, ca.ca)).toEqual({ alpn: 'http/1.1', subject: 'dev-gateway' });
    expect(await endpointTls()).toBe(true);
    const generated = await generate();
    expect(generated.status).toBe(200);
    const url = (generated.body as { urls: string[] }).urls[0]!;
    // By name: the certificate names localhost, and urllib3 1.26 checks a proxy by name only.
    expect(url).toMatch(new RegExp(`^https://[^@]+@localhost:${gatewayPort}$`));
    // The gateway learns the new account from the change feed: retried until it does.
    let out = '';
    await until(
      async () => {
        const curl = await run('curl', [
          '--silent',
          '--proxy',
          url,
          '--proxy-cacert',
          ca!.caFile,
          `http://127.0.0.1:${origin!.port}/peer`,
        ]).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
        out = curl.stdout;
        return out === '127.0.0.1';
      },
      'curl through the dev gateway with the https:// URL',
      30_000,
    );
    expect(out).toBe('127.0.0.1');
    // docs/gateway.md's urllib3 form, the credentials taken from the same URL.
    if (existsSync(DEBIAN_PYTHON) || process.env.CI === 'true') {
      const script = path.join(dataDir, 'client.py');
      await writeFile(script, PYTHON_CLIENT);
      const python = await run(DEBIAN_PYTHON, [
        script,
        url,
        ca.caFile,
        `http://127.0.0.1:${origin.port}/peer`,
      ]);
      expect(python).toEqual({ stdout: '200 127.0.0.1\n', stderr: '' });
    } else console.warn(`SKIPPED: the urllib3 step needs ${DEBIAN_PYTHON} (.ci/run installs it)`);
    proc.kill('SIGTERM');
    expect(await proc.exited).toBe(0);

    proc = startEntrypoint('dev/main.ts', env(false));
    await waitForHttp(`http://127.0.0.1:${apiPort}/readyz`, 200, 60_000);
    expect(await proc.waitForLog('proxyfleet dev is up')).toMatchObject({ gatewayTls: false });
    expect(await endpointTls()).toBe(false);
    await expect(handshake(gatewayPort, ca.ca)).rejects.toThrow();
    expect(await generate()).toMatchObject({
      status: 409,
      body: { success: false, error: 'No TLS is served for basic; use scheme http' },
    });
  }, 180_000);
});
