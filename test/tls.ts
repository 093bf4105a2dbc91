// Certificates for TLS tests: a throwaway certificate authority made with the openssl command
// (as an operator would), issuing short-lived leaf certificates for 127.0.0.1 and localhost.
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

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
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
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
      await run('openssl', [
        'req',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        keyFile,
        '-out',
        csr,
        '-subj',
        `/CN=${label}`,
      ]);
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
