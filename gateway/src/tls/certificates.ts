// The gateway's TLS certificate (docs/adr/0071): a PEM certificate chain and key from two files
// (PROXYFLEET_GATEWAY_TLS_CERT, PROXYFLEET_GATEWAY_TLS_KEY; in Kubernetes a mounted Secret),
// turned into the secure context new TLS sessions start with, and reloaded when the files change:
// the files are read again every few seconds and a changed pair that loads replaces the context.
// Sessions already open keep the context they began with; nothing restarts and nothing is cut.
// Polling rather than inotify: Kubernetes updates a Secret volume by swapping a symlinked
// directory, which a watch on the files themselves does not follow, and two small reads every
// few seconds cost nothing.
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import tls from 'node:tls';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '#common/logger.ts';

export interface CertificateFiles {
  certFile: string;
  keyFile: string;
}

export interface CertificateOptions extends CertificateFiles {
  logger: Logger;
  registry: Registry;
  /** How often the files are read again (default DEFAULT_RELOAD_MS). */
  reloadMs?: number;
}

export const DEFAULT_RELOAD_MS = 10_000;
/** RFC 5077 / OpenSSL ticket key material: name, AES and HMAC keys, 16 bytes each. */
const TICKET_KEY_BYTES = 48;

/** What every TLS session of the gateway is offered: TLS 1.2 and 1.3, ALPN http/1.1. */
export const TLS_VERSIONS = { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.3' } as const;
export const ALPN_PROTOCOLS = ['http/1.1'];

export interface LoadedCertificate {
  context: tls.SecureContext;
  /** The leaf certificate's end of validity. */
  notAfter: Date;
  subject: string;
  fingerprint256: string;
}

/**
 * Builds a secure context from PEM bytes, or throws saying what is wrong (no certificate, a key
 * that does not match it, ...). `ticketKeys` are kept across reloads, so a ticket issued before a
 * certificate change still resumes after it.
 */
export function loadCertificate(cert: Buffer, key: Buffer, ticketKeys: Buffer): LoadedCertificate {
  const context = tls.createSecureContext({ cert, key, ticketKeys, ...TLS_VERSIONS });
  const leaf = new X509Certificate(cert);
  return {
    context,
    notAfter: new Date(leaf.validTo),
    subject: leaf.subject,
    fingerprint256: leaf.fingerprint256,
  };
}

/** The process's certificate: the context for new sessions, reloaded from the files. */
export class GatewayCertificates {
  private loaded: LoadedCertificate;
  private last: { cert: Buffer; key: Buffer };
  /** What failed last (a hash of the pair, or the read error): reported once, not on every poll. */
  private failure: string | undefined;
  private readonly ticketKeys: Buffer;
  private readonly files: CertificateFiles;
  private readonly logger: Logger;
  private readonly reloads: Counter<'result'>;
  private readonly expiry: Gauge;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;

  private constructor(
    opts: CertificateOptions,
    first: { cert: Buffer; key: Buffer; loaded: LoadedCertificate; ticketKeys: Buffer },
  ) {
    this.files = { certFile: opts.certFile, keyFile: opts.keyFile };
    this.logger = opts.logger;
    this.loaded = first.loaded;
    this.last = { cert: first.cert, key: first.key };
    this.ticketKeys = first.ticketKeys;
    const registers = [opts.registry];
    this.reloads = new Counter({
      name: 'proxyfleet_gateway_tls_certificate_reloads_total',
      help: 'Changed certificate files read again: loaded (ok) or kept the previous certificate (failed)',
      labelNames: ['result'],
      registers,
    });
    for (const result of ['ok', 'failed']) this.reloads.labels({ result }).inc(0);
    this.expiry = new Gauge({
      name: 'proxyfleet_gateway_tls_certificate_expiry_timestamp_seconds',
      help: "The served certificate's notAfter, in seconds since the epoch",
      registers,
    });
    this.expiry.set(first.loaded.notAfter.getTime() / 1000);
  }

  /** Reads and loads the files; throws (the gateway does not start) when they do not load. */
  static async open(opts: CertificateOptions): Promise<GatewayCertificates> {
    const { cert, key } = await readPair(opts);
    const ticketKeys = randomBytes(TICKET_KEY_BYTES);
    let loaded: LoadedCertificate;
    try {
      loaded = loadCertificate(cert, key, ticketKeys);
    } catch (err) {
      throw new Error(`TLS certificate ${opts.certFile} with key ${opts.keyFile}: ${message(err)}`, {
        cause: err,
      });
    }
    const certificates = new GatewayCertificates(opts, { cert, key, loaded, ticketKeys });
    certificates.report('TLS certificate loaded');
    certificates.timer = setInterval(() => void certificates.poll(), opts.reloadMs ?? DEFAULT_RELOAD_MS);
    certificates.timer.unref();
    return certificates;
  }

  /** The context a new TLS session starts with. */
  get context(): tls.SecureContext {
    return this.loaded.context;
  }

  get current(): Readonly<LoadedCertificate> {
    return this.loaded;
  }

  /** Reads the files now and loads them if they changed (the timer calls it; tests too). */
  poll(): Promise<void> {
    this.polling ??= this.reload().finally(() => {
      this.polling = undefined;
    });
    return this.polling;
  }

  private async reload(): Promise<void> {
    let pair: { cert: Buffer; key: Buffer };
    try {
      pair = await readPair(this.files);
    } catch (err) {
      // A file missing for a moment (being replaced) is read again at the next poll.
      this.fail(`unreadable: ${message(err)}`, err);
      return;
    }
    if (pair.cert.equals(this.last.cert) && pair.key.equals(this.last.key)) {
      this.failure = undefined;
      return;
    }
    const signature = createHash('sha256').update(pair.cert).update(pair.key).digest('hex');
    if (signature === this.failure) return;
    try {
      this.loaded = loadCertificate(pair.cert, pair.key, this.ticketKeys);
    } catch (err) {
      // A certificate written before its key (or the other way round) fails until both are new.
      this.fail(signature, err);
      return;
    }
    this.last = pair;
    this.failure = undefined;
    this.reloads.inc({ result: 'ok' });
    this.expiry.set(this.loaded.notAfter.getTime() / 1000);
    this.report('TLS certificate reloaded');
  }

  /** Counts and logs a failed reload once per distinct failure, not on every poll. */
  private fail(signature: string, err: unknown): void {
    if (signature === this.failure) return;
    this.failure = signature;
    this.reloads.inc({ result: 'failed' });
    this.logger.warn(
      { certFile: this.files.certFile, keyFile: this.files.keyFile, err: message(err) },
      'TLS certificate files changed but do not load: the previous certificate is kept',
    );
  }

  private report(msg: string): void {
    const c = this.loaded;
    const level = c.notAfter.getTime() < Date.now() ? 'warn' : 'info';
    this.logger[level](
      { subject: c.subject, notAfter: c.notAfter.toISOString(), fingerprint256: c.fingerprint256 },
      level === 'warn' ? `${msg}: it has expired` : msg,
    );
  }

  close(): void {
    clearInterval(this.timer);
  }
}

async function readPair(files: CertificateFiles): Promise<{ cert: Buffer; key: Buffer }> {
  const [cert, key] = await Promise.all([readFile(files.certFile), readFile(files.keyFile)]);
  return { cert, key };
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
