// Certificates for TLS tests: a throwaway certificate authority made with the openssl command
// (as an operator would), issuing short-lived leaf certificates for 127.0.0.1 and localhost; and
// useTlsGateway, the gateway fixture with TLS on the port.
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type tls from 'node:tls';
import { promisify } from 'node:util';
import type { NewAccount } from '#common/accounts/accounts.ts';
import type { ProxyGateway } from '../gateway/src/spec.ts';
import { accountWithBandwidth } from './fixtures.ts';
import {
  cacheSynced,
  gatewaySpec,
  useTestGateway,
  type GatewayFixture,
  type TestGateway,
  type TestGatewayOptions,
} from './gateway/fixture.ts';
import { jestHooks } from './hooks.ts';

const run = promisify(execFile);
/** openssl req's arguments for a new unencrypted P-256 key, written to the file that follows. */
const NEW_P256_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout'];

export interface IssuedCertificate {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
  fingerprint256: string;
  /** base64 sha256 of the public key (SubjectPublicKeyInfo): Chromium's SPKI pin format. */
  spkiSha256: string;
}

export interface TestCa {
  dir: string;
  caFile: string;
  ca: Buffer;
  /** A leaf certificate for `names` (DNS names or IP addresses), signed by this CA. */
  issue(label: string, names?: string[]): Promise<IssuedCertificate>;
  remove(): Promise<void>;
}

export async function createTestCa(): Promise<TestCa> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-tls-'));
  const caKey = path.join(dir, 'ca.key');
  const caFile = path.join(dir, 'ca.pem');
  await run('openssl', [
    'req',
    '-x509',
    ...NEW_P256_KEY,
    caKey,
    '-out',
    caFile,
    '-days',
    '2',
    '-subj',
    '/CN=proxyfleet test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  let serial = 1;
  return {
    dir,
    caFile,
    ca: await readFile(caFile),
    async issue(label, names = ['127.0.0.1', 'localhost']) {
      const keyFile = path.join(dir, `${label}.key`);
      const csr = path.join(dir, `${label}.csr`);
      const certFile = path.join(dir, `${label}.pem`);
      const ext = path.join(dir, `${label}.ext`);
      const san = names.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
      await run('openssl', ['req', ...NEW_P256_KEY, keyFile, '-out', csr, '-subj', `/CN=${label}`]);
      await writeFile(
        ext,
        `subjectAltName=${san}\nextendedKeyUsage=serverAuth\nbasicConstraints=critical,CA:FALSE\n`,
      );
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        caFile,
        '-CAkey',
        caKey,
        '-set_serial',
        String(serial++),
        '-days',
        '1',
        '-extfile',
        ext,
        '-out',
        certFile,
      ]);
      const cert = await readFile(certFile);
      const x509 = new X509Certificate(cert);
      const spki = x509.publicKey.export({ type: 'spki', format: 'der' });
      return {
        certFile,
        keyFile,
        cert,
        key: await readFile(keyFile),
        fingerprint256: x509.fingerprint256,
        spkiSha256: createHash('sha256').update(spki).digest('base64'),
      };
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

export interface TlsGatewayFixture extends GatewayFixture {
  ca: TestCa;
  /** The gateways' certificate ('gateway', for 127.0.0.1 and localhost), signed by `ca`. */
  leaf: IssuedCertificate;
  /** Every gateway the fixture started on `leaf`, in the order of `specs`; `gateway` is the first. */
  gateways: TestGateway[];
  /** An account with 1 GB of basic bandwidth, applied by the gateways' caches. */
  account: NewAccount;
  /** Client options for a TLS session to the gateways: trust the test CA, ask for localhost. */
  trusted: () => tls.ConnectionOptions;
}

/**
 * useTestGateway with TLS on the port (docs/adr/0071): a test CA and its leaf, gateways started on
 * the leaf's files (default one gatewaySpec('basic'); none with `specs: []`) and an account they
 * know, for the whole test file; the CA's files are removed once the gateways are stopped.
 */
export function useTlsGateway(
  options: { specs?: () => ProxyGateway[]; gateway?: TestGatewayOptions } = {},
): TlsGatewayFixture {
  const fixture = useTestGateway({ gateway: false }) as TlsGatewayFixture;
  fixture.gateways = [];
  fixture.trusted = () => ({ ca: fixture.ca.ca, servername: 'localhost' });
  jestHooks().beforeAll(async () => {
    fixture.ca = await createTestCa();
    fixture.onClose(() => fixture.ca.remove());
    fixture.leaf = await fixture.ca.issue('gateway');
    const files = { certFile: fixture.leaf.certFile, keyFile: fixture.leaf.keyFile };
    for (const spec of options.specs?.() ?? [gatewaySpec('basic')])
      fixture.gateways.push(await fixture.start(spec, { ...options.gateway, tls: files }));
    if (fixture.gateways[0]) fixture.gateway = fixture.gateways[0];
    fixture.account = await accountWithBandwidth(fixture.db.pool, { basic: 1_000_000_000 });
    await cacheSynced(fixture.db.pool, fixture.gateways);
  }, 60_000);
  return fixture;
}
