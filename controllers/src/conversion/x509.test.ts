// The hand-built certificates are what TLS stacks accept: node's X509Certificate parses them, the
// serving certificate is issued by the CA and names the hosts; a TLS client that trusts only the
// CA connects to a server presenting it (the API server does the same in conversion.int.test.ts).
import { X509Certificate } from 'node:crypto';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:tls';
import { expect, test } from '@jest/globals';
import { createCertificate } from './x509.ts';

const notBefore = new Date('2026-01-01T00:00:00Z');
const notAfter = new Date('2051-06-01T00:00:00Z'); // past 2049: GeneralizedTime

test('a CA and a serving certificate it signs, for DNS names and IPv4/IPv6 addresses', () => {
  const ca = createCertificate({ commonName: 'test CA', notBefore, notAfter });
  const leaf = createCertificate({
    commonName: 'wh.ns.svc',
    hosts: ['wh.ns.svc', '127.0.0.1', 'fd00::1'],
    notBefore,
    notAfter,
    issuer: ca,
  });
  const c = new X509Certificate(ca.cert);
  const l = new X509Certificate(leaf.cert);
  expect(c.ca).toBe(true);
  expect(l.ca).toBe(false);
  expect(l.issuer).toBe('CN=test CA');
  expect(l.checkIssued(c)).toBe(true);
  expect(l.verify(c.publicKey)).toBe(true);
  expect(l.checkHost('wh.ns.svc')).toBe('wh.ns.svc');
  expect(l.checkIP('127.0.0.1')).toBe('127.0.0.1');
  expect(l.checkIP('fd00::1')).toBe('fd00::1');
  expect(l.checkHost('other.ns.svc')).toBeUndefined();
  expect(new Date(l.validTo).toISOString()).toBe(notAfter.toISOString());
  expect(l.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
});

test('a TLS client trusting only the CA verifies the served certificate', async () => {
  const now = Date.now();
  const ca = createCertificate({
    commonName: 'ca',
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 3_600_000),
  });
  const leaf = createCertificate({
    commonName: 'localhost',
    hosts: ['localhost', '127.0.0.1'],
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 3_600_000),
    issuer: ca,
  });
  const server = createServer({ cert: leaf.cert, key: leaf.key }, (_req, res) => res.end('ok'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  try {
    const authorized = await new Promise<boolean>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, ca: ca.cert, servername: 'localhost' }, () => {
        resolve(s.authorized);
        s.end();
      });
      s.on('error', reject);
    });
    expect(authorized).toBe(true);
    const other = createCertificate({
      commonName: 'other',
      notBefore: new Date(now - 60_000),
      notAfter: new Date(now + 3_600_000),
    });
    await expect(
      new Promise((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port, ca: other.cert, servername: 'localhost' }, () =>
          resolve(s.end()),
        );
        s.on('error', reject);
      }),
    ).rejects.toThrow(/self[- ]signed|unable to verify|certificate/i);
  } finally {
    server.close();
  }
});
