// Real clients through a real gateway over TLS (docs/adr/0071), for plain requests and for CONNECT
// tunnels to an HTTPS origin (TLS inside TLS): the machine's curl (`--proxy https://` with
// `--proxy-cacert`), Debian's Python 3 with its urllib3 (1.26: HTTPS proxies and TLS in TLS since
// 1.26.0), Node's undici ProxyAgent, and Chromium with `--proxy-server=https://...`. Each trusts the
// test CA; Chromium, which on Linux takes CAs only from an NSS database (certutil is not installed
// here), is told to accept the gateway's key by its SPKI hash instead.
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import https from 'node:https';
import type net from 'node:net';
import path from 'node:path';
import { ProxyAgent, request } from 'undici';
import { upsertGatewayEndpoint } from '#common/gateway-endpoints.ts';
import { TEST_CREDENTIALS_KEY } from '#test/fixtures.ts';
import { generateRequestSchema } from '#api/modules/proxies/schemas.ts';
import { generateProxySet } from '#api/modules/proxies/service.ts';
import { basicAuth } from '#test/gateway/client.ts';
import { counterDelta, counterValues } from '#test/gateway/usage.ts';
import { useTlsGateway, type IssuedCertificate } from '#test/tls.ts';
import { describeInChromium, launchChromium } from '#test/dashboard.ts';

const DEBIAN_PYTHON = '/usr/bin/python3';
// Real clients on a shared 2-core machine: generous limits; nothing here measures speed.
jest.setTimeout(120_000);

const fx = useTlsGateway();
let secureOrigin: https.Server;
let securePort: number;
let originLeaf: IssuedCertificate;

beforeAll(async () => {
  originLeaf = await fx.ca.issue('origin');
  secureOrigin = https.createServer({ cert: originLeaf.cert, key: originLeaf.key }, (req, res) => {
    res.setHeader('content-type', 'text/plain');
    res.end(`secure ${req.socket.remoteAddress ?? ''}`);
  });
  await new Promise<void>((r) => secureOrigin.listen(0, '127.0.0.1', r));
  securePort = (secureOrigin.address() as net.AddressInfo).port;
});

afterAll(async () => {
  secureOrigin?.closeAllConnections();
  await new Promise((r) => secureOrigin?.close(r));
});

const proxyUrl = () => `https://127.0.0.1:${fx.gateway.port}`;
const plainUrl = () => `http://127.0.0.1:${fx.origin.port}/peer`;
const secureUrl = () => `https://127.0.0.1:${securePort}/`;
const password = () => `${fx.account.proxyPassword}_country-us`;

/** Requests the gateway counted since `before`, by kind (http: forwarded, connect: tunnels). */
async function requestsSince(before: Record<string, number>): Promise<Record<string, number>> {
  return counterDelta(await counterValues(fx.gateway, 'proxyfleet_gateway_requests_total'), before);
}
const requests = () => counterValues(fx.gateway, 'proxyfleet_gateway_requests_total');

function run(file: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

describe('curl --proxy https://', () => {
  it('forwards a plain request and tunnels an HTTPS one, verifying the proxy with --proxy-cacert', async () => {
    const version = await run('curl', ['--version']);
    expect(version.stdout).toMatch(/HTTPS-proxy/);
    const before = await requests();
    const common = ['--silent', '--show-error', '--proxy', proxyUrl(), '--proxy-cacert', fx.ca.caFile];
    const creds = ['--proxy-user', `${fx.account.proxyUsername}:${password()}`];
    const plain = await run('curl', [...common, ...creds, plainUrl()]);
    expect(plain).toMatchObject({ code: 0, stdout: '127.0.0.1' });
    const tunnel = await run('curl', [...common, ...creds, '--cacert', fx.ca.caFile, secureUrl()]);
    expect(tunnel).toMatchObject({ code: 0, stdout: 'secure 127.0.0.1' });
    // The proxy's certificate is checked: without the CA curl refuses it, and nothing is sent.
    const untrusted = await run('curl', [...common.slice(0, 4), ...creds, plainUrl()]);
    expect(untrusted.code).toBe(60);
    expect(await requestsSince(before)).toEqual({ http: 1, connect: 1 });
  });
});

describe('the https:// form POST /api/v1/proxies/generate gives', () => {
  it('works as is with curl --proxy, credentials and targeting in the URL', async () => {
    await upsertGatewayEndpoint(
      fx.db.pool,
      { plan: 'basic', host: '127.0.0.1', port: fx.gateway.port, tls: true },
      'test',
    );
    const { urls } = await generateProxySet(
      { pool: fx.db.pool, credentialsKey: TEST_CREDENTIALS_KEY, fallbackHost: 'unused.example' },
      fx.account.id,
      generateRequestSchema.parse({
        provider: 'basic',
        country: 'us',
        sessionType: 'sticky',
        scheme: 'https',
      }),
    );
    expect(urls![0]).toMatch(/^https:\/\/[a-z0-9]+:[^@]+_country-us_session-[a-z0-9]{10}@127\.0\.0\.1:\d+$/);
    const before = await requests();
    const result = await run('curl', [
      '--silent',
      '--show-error',
      '--proxy',
      urls![0]!,
      '--proxy-cacert',
      fx.ca.caFile,
      plainUrl(),
    ]);
    expect(result).toMatchObject({ code: 0, stdout: '127.0.0.1' });
    expect(await requestsSince(before)).toEqual({ http: 1 });
  });
});

describe("Debian's Python (urllib3 1.26)", () => {
  // .ci/run installs it; elsewhere the test is skipped without it, loudly.
  const haveDebianPython = existsSync(DEBIAN_PYTHON);
  if (!haveDebianPython)
    console.warn(`SKIPPED: the urllib3 test needs ${DEBIAN_PYTHON} (.ci/run installs it)`);
  (haveDebianPython || process.env.CI === 'true' ? it : it.skip)(
    'forwards and tunnels through an https:// proxy',
    async () => {
      const script = path.join(fx.ca.dir, 'client.py');
      await writeFile(
        script,
        [
          'import json, ssl, sys, urllib3',
          'proxy, ca, user, secret, plain, secure = sys.argv[1:7]',
          'context = ssl.create_default_context(cafile=ca)',
          'manager = urllib3.ProxyManager(proxy, proxy_headers=urllib3.make_headers(proxy_basic_auth=user + ":" + secret),',
          '    proxy_ssl_context=context, cert_reqs="CERT_REQUIRED", ca_certs=ca)',
          'answers = [manager.request("GET", url, retries=False) for url in (plain, secure)]',
          'print(json.dumps({"version": urllib3.__version__, "answers": [[a.status, a.data.decode()] for a in answers]}))',
        ].join('\n'),
      );
      const before = await requests();
      const result = await run(DEBIAN_PYTHON, [
        script,
        // By name: urllib3 1.26 sends no server name for an IP address and then cannot check it.
        proxyUrl().replace('127.0.0.1', 'localhost'),
        fx.ca.caFile,
        fx.account.proxyUsername,
        password(),
        plainUrl(),
        secureUrl(),
      ]);
      expect(result.stderr).toBe('');
      const out = JSON.parse(result.stdout) as { version: string; answers: [number, string][] };
      expect(out.version).toMatch(/^1\.26\./);
      expect(out.answers).toEqual([
        [200, '127.0.0.1'],
        [200, 'secure 127.0.0.1'],
      ]);
      expect(await requestsSince(before)).toEqual({ http: 1, connect: 1 });
    },
  );
});

describe('undici ProxyAgent', () => {
  it('forwards plain requests, tunnels HTTPS ones, and tunnels a plain request when asked to', async () => {
    const before = await requests();
    // The credentials in the proxy URL (as docs/gateway.md shows), or as a token.
    const agent = (proxyTunnel?: boolean) =>
      new ProxyAgent({
        ...(proxyTunnel === undefined
          ? {
              uri: proxyUrl().replace(
                '//',
                `//${fx.account.proxyUsername}:${encodeURIComponent(password())}@`,
              ),
            }
          : { uri: proxyUrl(), token: basicAuth(fx.account.proxyUsername, password()) }),
        proxyTls: { ca: fx.ca.ca },
        requestTls: { ca: fx.ca.ca },
        ...(proxyTunnel === undefined ? {} : { proxyTunnel }),
      });
    const forwarding = agent();
    for (let i = 0; i < 3; i++) {
      const res = await request(plainUrl(), { dispatcher: forwarding });
      expect([res.statusCode, await res.body.text()]).toEqual([200, '127.0.0.1']);
    }
    const secure = await request(secureUrl(), { dispatcher: forwarding });
    expect([secure.statusCode, await secure.body.text()]).toEqual([200, 'secure 127.0.0.1']);
    const tunnelling = agent(true);
    const tunnelled = await request(plainUrl(), { dispatcher: tunnelling });
    expect([tunnelled.statusCode, await tunnelled.body.text()]).toEqual([200, '127.0.0.1']);
    await forwarding.close();
    await tunnelling.close();
    expect(await requestsSince(before)).toEqual({ http: 3, connect: 2 });
  });
});

describeInChromium('Chromium --proxy-server=https://', () => {
  it('loads a plain page and an HTTPS page through the gateway, answering its 407 with the credentials', async () => {
    const before = await requests();
    const refusalsBefore = await counterValues(fx.gateway, 'proxyfleet_gateway_refusals_total');
    const browser = await launchChromium({
      proxy: {
        server: proxyUrl(),
        // Chromium never proxies loopback unless told to (its implicit bypass list).
        bypass: '<-loopback>',
        username: fx.account.proxyUsername,
        password: password(),
      },
      args: [
        // Trust exactly the two test keys (no NSS certutil on this machine to add the CA).
        `--ignore-certificate-errors-spki-list=${fx.leaf.spkiSha256},${originLeaf.spkiSha256}`,
      ],
    });
    try {
      const page = await browser.newPage();
      const plain = await page.goto(plainUrl());
      expect(plain?.status()).toBe(200);
      expect(await page.textContent('body')).toBe('127.0.0.1');
      const secure = await page.goto(secureUrl());
      expect(secure?.status()).toBe(200);
      expect(await page.textContent('body')).toBe('secure 127.0.0.1');
    } finally {
      await browser.close();
    }
    // Chromium asked without credentials first, got 407 and Proxy-Authenticate, then sent them.
    const refused = counterDelta(
      await counterValues(fx.gateway, 'proxyfleet_gateway_refusals_total'),
      refusalsBefore,
    );
    expect(Object.keys(refused)).toEqual(['missing 4xx']);
    const seen = await requestsSince(before);
    expect(seen.http).toBeGreaterThanOrEqual(1);
    expect(seen.connect).toBeGreaterThanOrEqual(1);
  });
});
