// The gateway's certificate, rotated while customers are connected (docs/adr/0071): the files are
// replaced the way Kubernetes updates a mounted Secret (a new directory, the `..data` symlink
// swapped) and in place; sessions open before keep working on the old certificate, new sessions
// get the new one, tickets issued before still resume; a pair that does not load is refused once
// and the previous certificate kept; a gateway whose files do not load does not start.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { copyFile, mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { Registry } from 'prom-client';
import { createLogger } from '#common/logger.ts';
import { cacheSynced, gatewaySpec, startTestGateway } from '#test/gateway/fixture.ts';
import { basicAuth, get } from '#test/gateway/client.ts';
import { spawnGateway } from '#test/gateway/process.ts';
import { useTlsGateway, type IssuedCertificate } from '#test/tls.ts';
import { GatewayCertificates } from './certificates.ts';

// No gateway from the fixture: each test starts its own on the files it publishes.
const fx = useTlsGateway({ specs: () => [] });
let first: IssuedCertificate;
let second: IssuedCertificate;
let third: IssuedCertificate;
let mount: string;
let auth: string;

beforeAll(async () => {
  [first, second, third] = [
    await fx.ca.issue('first'),
    await fx.ca.issue('second'),
    await fx.ca.issue('third'),
  ];
  auth = basicAuth(fx.account.proxyUsername, fx.account.proxyPassword);
  mount = await mkdtemp(path.join(os.tmpdir(), 'pf-secret-'));
});

afterAll(async () => {
  await rm(mount, { recursive: true, force: true });
});

/** Publishes a pair as the kubelet updates a Secret volume: tls.crt -> ..data/tls.crt, ..data swapped. */
let version = 0;
async function publish(cert: IssuedCertificate, key: IssuedCertificate = cert): Promise<void> {
  const dir = path.join(mount, `..v${++version}`);
  await mkdir(dir);
  await copyFile(cert.certFile, path.join(dir, 'tls.crt'));
  await copyFile(key.keyFile, path.join(dir, 'tls.key'));
  await symlink(path.basename(dir), path.join(mount, '..data_tmp'));
  await rename(path.join(mount, '..data_tmp'), path.join(mount, '..data'));
  if (version === 1) {
    await symlink('..data/tls.crt', path.join(mount, 'tls.crt'));
    await symlink('..data/tls.key', path.join(mount, 'tls.key'));
  }
}

/** A keep-alive TLS connection to the gateway and the certificate it was shown. */
async function connect(port: number, session?: Buffer) {
  const socket = tls.connect({
    port,
    host: '127.0.0.1',
    ca: fx.ca.ca,
    servername: 'localhost',
    ...(session ? { session } : {}),
  });
  socket.on('error', () => undefined);
  let ticket: Buffer | undefined;
  socket.on('session', (s: Buffer) => (ticket = s));
  await new Promise((r) => socket.once('secureConnect', r));
  const request = async () => {
    socket.write(get(`http://127.0.0.1:${fx.origin.port}/peer`, auth));
    const answer = await new Promise<string>((r) =>
      socket.once('data', (c: Buffer) => r(c.toString('latin1'))),
    );
    return Number(answer.split(' ')[1]);
  };
  return {
    socket,
    // (None on a resumed session: the handshake carries no certificate.)
    fingerprint: socket.getPeerX509Certificate()?.fingerprint256,
    resumed: socket.isSessionReused(),
    request,
    ticket: () => ticket,
  };
}

/** The reload counter by result (it has no plan label: one certificate per process). */
async function reloads(g: { registry: Registry }): Promise<Record<string, number>> {
  const metric = g.registry.getSingleMetric('proxyfleet_gateway_tls_certificate_reloads_total')!;
  return Object.fromEntries(
    (await metric.get()).values.filter((v) => v.value > 0).map((v) => [String(v.labels.result), v.value]),
  );
}

async function until(done: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await done()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('certificate rotation', () => {
  it('serves the new certificate to new sessions, keeps old sessions and tickets working', async () => {
    await publish(first);
    const gateway = await startTestGateway(fx.db.pool, fx.db.url, gatewaySpec('basic'), {
      tls: { certFile: path.join(mount, 'tls.crt'), keyFile: path.join(mount, 'tls.key'), reloadMs: 50 },
    });
    try {
      await cacheSynced(fx.db.pool, [gateway]);
      const old = await connect(gateway.port);
      expect(old.fingerprint).toBe(first.fingerprint256);
      expect(await old.request()).toBe(200);

      // cert-manager renews: the Secret's files change under the running gateway.
      await publish(second);
      await until(async () => (await reloads(gateway)).ok === 1, 'the reload');
      const fresh = await connect(gateway.port);
      expect(fresh.fingerprint).toBe(second.fingerprint256);
      expect(await fresh.request()).toBe(200);
      // The connection opened before the change was not dropped and still serves.
      expect(await old.request()).toBe(200);
      // A ticket issued under the first certificate resumes under the second (the ticket keys stay).
      const resumed = await connect(gateway.port, old.ticket());
      expect(resumed.resumed).toBe(true);
      expect(await resumed.request()).toBe(200);

      // A certificate without its key (a half-written update): refused once, the second kept.
      await publish(third, second);
      await until(async () => (await reloads(gateway)).failed === 1, 'the refused reload');
      await new Promise((r) => setTimeout(r, 200));
      expect(await reloads(gateway)).toEqual({ ok: 1, failed: 1 });
      expect((await connect(gateway.port)).fingerprint).toBe(second.fingerprint256);
      // Then the key arrives: the third certificate is served.
      await publish(third);
      await until(async () => (await reloads(gateway)).ok === 2, 'the second reload');
      expect((await connect(gateway.port)).fingerprint).toBe(third.fingerprint256);
      for (const c of [old, fresh, resumed]) c.socket.destroy();
    } finally {
      await gateway.close();
    }
  });

  it('also reloads files replaced in place', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-plain-'));
    const certFile = path.join(dir, 'cert.pem');
    const keyFile = path.join(dir, 'key.pem');
    await copyFile(first.certFile, certFile);
    await copyFile(first.keyFile, keyFile);
    const registry = new Registry();
    const certificates = await GatewayCertificates.open({
      certFile,
      keyFile,
      logger: createLogger('test', 'silent'),
      registry,
      reloadMs: 3_600_000,
    });
    try {
      expect(certificates.current.fingerprint256).toBe(first.fingerprint256);
      await copyFile(second.keyFile, keyFile);
      await copyFile(second.certFile, certFile);
      await certificates.poll();
      expect(certificates.current.fingerprint256).toBe(second.fingerprint256);
      const expiry = (
        await registry.getSingleMetric('proxyfleet_gateway_tls_certificate_expiry_timestamp_seconds')!.get()
      ).values[0]!.value;
      expect(expiry).toBe(certificates.current.notAfter.getTime() / 1000);
    } finally {
      certificates.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses to start on files that do not load, saying which', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-bad-'));
    const open = (certFile: string, keyFile: string) =>
      GatewayCertificates.open({
        certFile,
        keyFile,
        logger: createLogger('test', 'silent'),
        registry: new Registry(),
      });
    try {
      await writeFile(path.join(dir, 'junk.pem'), 'not a certificate\n');
      await expect(open(path.join(dir, 'missing.pem'), first.keyFile)).rejects.toThrow(/ENOENT/);
      await expect(open(path.join(dir, 'junk.pem'), first.keyFile)).rejects.toThrow(/junk\.pem/);
      await expect(open(first.certFile, second.keyFile)).rejects.toThrow(/key values mismatch/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('in the gateway process: from the environment, rotated while a customer is connected', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pf-proc-'));
    const certFile = path.join(dir, 'tls.crt');
    const keyFile = path.join(dir, 'tls.key');
    await copyFile(first.certFile, certFile);
    await copyFile(first.keyFile, keyFile);
    const spec = gatewaySpec('basic', undefined, { tls: { refuseCredentialsInClear: true } });
    const gateway = await spawnGateway(fx.db.url, spec, {
      PROXYFLEET_GATEWAY_TLS_CERT: certFile,
      PROXYFLEET_GATEWAY_TLS_KEY: keyFile,
      PROXYFLEET_GATEWAY_TLS_RELOAD_SECONDS: '1',
    });
    try {
      await cacheSynced(fx.db.pool, 1);
      const old = await connect(gateway.port);
      expect(old.fingerprint).toBe(first.fingerprint256);
      expect(await old.request()).toBe(200);
      await copyFile(second.keyFile, keyFile);
      await copyFile(second.certFile, certFile);
      await until(
        async () => (await connect(gateway.port)).fingerprint === second.fingerprint256,
        'the new certificate',
      );
      expect(await old.request()).toBe(200);
      old.socket.destroy();
      expect(gateway.output()).toMatch(/"msg":"TLS certificate reloaded"/);
    } finally {
      expect(await gateway.stop()).toBe(0);
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('in the gateway process: refusing credentials in clear without a certificate stops the start, saying why', async () => {
    const spec = gatewaySpec('basic', undefined, { tls: { refuseCredentialsInClear: true } });
    await expect(spawnGateway(fx.db.url, spec)).rejects.toThrow(
      /refuseCredentialsInClear needs a certificate/,
    );
  });
});
