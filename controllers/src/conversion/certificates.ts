// The conversion webhook's serving certificate, made and rotated by the controller itself
// (docs/adr/0121): a self-signed CA and a serving certificate for the webhook Service's DNS
// names, kept in one Secret every replica serves from, and the CA bundle patched into both
// CRDs' spec.conversion.webhook.clientConfig.caBundle. A new CA is published in the bundle
// (beside the current one) a propagation delay before any replica serves a certificate it
// signed, so the API server trusts the new certificate before it sees it: no failed conversion.
// Every replica runs this loop; writes are conditional on resourceVersion, so concurrent
// replicas converge. With cert-manager (mode 'cert-manager') the Secret is cert-manager's and
// its CA injector fills caBundle: the loop only reads the Secret and serves it.
import { X509Certificate } from 'node:crypto';
import type { Logger } from '#common/logger.ts';
import {
  isConflict,
  KubeApiError,
  type KubeClient,
  type KubeObject,
  type Resource,
} from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { createCertificate, type KeyPair } from './x509.ts';

export const CRD: Resource = {
  group: 'apiextensions.k8s.io',
  version: 'v1',
  plural: 'customresourcedefinitions',
  kind: 'CustomResourceDefinition',
  namespaced: false,
};
export const CONVERTED_CRDS = ['proxygateways.proxyfleet.io', 'apikeys.proxyfleet.io'];
/** On the Secret: when the pending CA (next-ca.crt) was seen in both CRDs' caBundle. */
export const PUBLISHED_ANNOTATION = 'proxyfleet.io/next-ca-published-at';

const DAY = 86_400_000;
export const DEFAULT_TIMES = {
  caValidityMs: 365 * DAY,
  caRenewBeforeMs: 90 * DAY,
  servingValidityMs: 90 * DAY,
  servingRenewBeforeMs: 30 * DAY,
  /** How long the bundle with a new CA stands before certificates it signed are served. */
  propagationMs: 5 * 60_000,
};

export interface CertificateOptions {
  client: KubeClient;
  logger: Logger;
  namespace: string;
  secretName: string;
  /** The webhook Service's name: the certificate names <service>.<namespace>.svc and its short forms. */
  serviceName: string;
  /** More names or addresses for the serving certificate (127.0.0.1 in tests). */
  extraHosts?: string[];
  mode: 'self' | 'cert-manager';
  /** Read at every step (tests change them to make a renewal due). */
  times?: Partial<typeof DEFAULT_TIMES>;
  /** Called with the certificate to serve whenever it changes. */
  onServing: (pair: KeyPair) => void;
}

interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const unb64 = (s: string | undefined) => (s === undefined ? undefined : Buffer.from(s, 'base64').toString());
const notAfter = (pem: string) => new Date(new X509Certificate(pem).validTo).getTime();
/** The PEM blocks of a bundle. */
const certsOf = (bundle: string) =>
  bundle.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----\n?/g) ?? [];
const normal = (pem: string) => pem.trim() + '\n';

export class WebhookCertificates {
  private readonly o: CertificateOptions;
  private serving: string | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: CertificateOptions) {
    this.o = options;
  }

  private get times(): typeof DEFAULT_TIMES {
    return { ...DEFAULT_TIMES, ...this.o.times };
  }

  get hosts(): string[] {
    const { serviceName: s, namespace: ns } = this.o;
    return [s, `${s}.${ns}`, `${s}.${ns}.svc`, `${s}.${ns}.svc.cluster.local`, ...(this.o.extraHosts ?? [])];
  }

  /** Runs tick() now and then every intervalMs; tick failures are logged and retried. */
  async start(intervalMs = 60_000): Promise<void> {
    await this.tick();
    const loop = () => {
      this.timer = setTimeout(() => {
        this.tick()
          .catch((err: unknown) => this.o.logger.warn({ err }, 'webhook certificate check failed'))
          .finally(loop);
      }, intervalMs);
      this.timer.unref();
    };
    loop();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  /** One step: make, renew or promote what is due, publish the bundle, serve the current pair. */
  async tick(): Promise<void> {
    const { client, namespace, secretName } = this.o;
    let secret = await client.get<Secret>(RESOURCES.secret, namespace, secretName);
    if (this.o.mode === 'self') {
      try {
        secret = await this.step(secret);
      } catch (err) {
        // Another replica wrote first: the next tick starts from what it wrote.
        if (!(isConflict(err) || (err instanceof KubeApiError && err.reason === 'AlreadyExists'))) throw err;
        secret = await client.get<Secret>(RESOURCES.secret, namespace, secretName);
      }
    }
    const cert = unb64(secret?.data?.['tls.crt']);
    const key = unb64(secret?.data?.['tls.key']);
    if (!cert || !key) {
      if (this.o.mode === 'cert-manager')
        this.o.logger.warn({ secretName }, 'waiting for the webhook certificate');
      return;
    }
    if (this.serving !== cert) {
      this.serving = cert;
      this.o.onServing({ cert, key });
      this.o.logger.info({ notAfter: new X509Certificate(cert).validTo }, 'serving webhook certificate');
    }
  }

  /**
   * The webhook Service as the Secret's owner, so that `helm uninstall`, which deletes the Service,
   * takes the Secret the controller made with it (garbage collection). None where there is no such
   * Service (a webhook served outside a cluster, as in the kube tests).
   */
  private async serviceOwner(): Promise<KubeObject['metadata']['ownerReferences']> {
    const { client, namespace, serviceName } = this.o;
    const service = await client
      .get<KubeObject>(RESOURCES.service, namespace, serviceName)
      .catch((err: unknown) => {
        this.o.logger.warn(
          { err, serviceName },
          'webhook Service not readable: its certificate Secret gets no owner',
        );
        return undefined;
      });
    if (!service?.metadata.uid) return undefined;
    return [{ apiVersion: 'v1', kind: 'Service', name: serviceName, uid: service.metadata.uid }];
  }

  private issueServing(ca: KeyPair): KeyPair {
    const now = new Date();
    return createCertificate({
      commonName: this.hosts[2]!,
      hosts: this.hosts,
      notBefore: new Date(now.getTime() - 60_000),
      notAfter: new Date(now.getTime() + this.times.servingValidityMs),
      issuer: ca,
    });
  }

  private issueCa(): KeyPair {
    const now = new Date();
    return createCertificate({
      commonName: `${this.o.serviceName} webhook CA ${now.toISOString()}`,
      notBefore: new Date(now.getTime() - 60_000),
      notAfter: new Date(now.getTime() + this.times.caValidityMs),
    });
  }

  private async step(secret: Secret | undefined): Promise<Secret> {
    const { client, namespace, secretName } = this.o;
    const d = secret?.data ?? {};
    const ca = { cert: unb64(d['ca.crt']) ?? '', key: unb64(d['ca.key']) ?? '' };
    const serving = { cert: unb64(d['tls.crt']) ?? '', key: unb64(d['tls.key']) ?? '' };
    const now = Date.now();
    const write = async (
      data: Record<string, string | undefined>,
      annotations: Record<string, string | null>,
    ) => {
      const body = Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, v === undefined ? null : b64(v)]),
      );
      if (!secret) {
        const created = {
          apiVersion: 'v1',
          kind: 'Secret',
          type: 'Opaque',
          metadata: { name: secretName, namespace, ownerReferences: await this.serviceOwner() },
          data: body,
        };
        return client.create<Secret>(RESOURCES.secret, created);
      }
      return client.mergePatch<Secret>(RESOURCES.secret, namespace, secretName, {
        metadata: { resourceVersion: secret.metadata.resourceVersion, annotations },
        data: body,
      });
    };
    if (!usable(ca) || !usable(serving)) {
      const fresh = this.issueCa();
      const leaf = this.issueServing(fresh);
      this.o.logger.info('creating the webhook CA and serving certificate');
      const created = await write(pairData(fresh, leaf, [fresh.cert]), { [PUBLISHED_ANNOTATION]: null });
      await this.publish(fresh.cert);
      return created;
    }
    const bundle = unb64(d['ca-bundle.crt']) ?? ca.cert;
    const next = { cert: unb64(d['next-ca.crt']) ?? '', key: unb64(d['next-ca.key']) ?? '' };
    if (usable(next)) {
      const published = secret?.metadata.annotations?.[PUBLISHED_ANNOTATION];
      if (!published) {
        await this.publish(bundle);
        return write({}, { [PUBLISHED_ANNOTATION]: new Date(now).toISOString() });
      }
      if (now - Date.parse(published) < this.times.propagationMs)
        return this.publish(bundle).then(() => secret);
      // The API servers have had the new CA long enough: serve what it signs (the old CA stays in
      // the bundle for replicas still serving the old certificate until they re-read the Secret).
      this.o.logger.info('promoting the new webhook CA');
      const leaf = this.issueServing(next);
      const promoted = await write(
        { ...pairData(next, leaf, [next.cert, ca.cert]), 'next-ca.crt': undefined, 'next-ca.key': undefined },
        { [PUBLISHED_ANNOTATION]: null },
      );
      await this.publish([next.cert, ca.cert].join(''));
      return promoted;
    }
    if (notAfter(ca.cert) - now < this.times.caRenewBeforeMs) {
      this.o.logger.info('publishing a new webhook CA beside the current one');
      const fresh = this.issueCa();
      const written = await write(
        {
          'next-ca.crt': fresh.cert,
          'next-ca.key': fresh.key,
          'ca-bundle.crt': [ca.cert, fresh.cert].join(''),
        },
        { [PUBLISHED_ANNOTATION]: null },
      );
      return written;
    }
    if (notAfter(serving.cert) - now < this.times.servingRenewBeforeMs) {
      this.o.logger.info('renewing the webhook serving certificate');
      const leaf = this.issueServing(ca);
      return write({ 'tls.crt': leaf.cert, 'tls.key': leaf.key }, {});
    }
    await this.publish(bundle);
    return secret!;
  }

  /** Sets caBundle on both CRDs where it differs (a merge patch of that one field). */
  async publish(bundle: string): Promise<void> {
    const want = b64(certsOf(bundle).map(normal).join(''));
    for (const name of CONVERTED_CRDS) {
      const crd = await this.o.client.get<
        KubeObject & {
          spec: {
            conversion?: {
              webhook?: {
                clientConfig?: { caBundle?: string; service?: { namespace: string; name: string } };
              };
            };
          };
        }
      >(CRD, undefined, name);
      if (!crd) continue;
      const config = crd.spec.conversion?.webhook?.clientConfig;
      // CRDs are cluster-wide: kept from a release elsewhere, they call that release's webhook.
      // Taking them over would have two releases re-pointing them in turn; say so instead.
      const service = config?.service;
      if (service && (service.namespace !== this.o.namespace || service.name !== this.o.serviceName)) {
        this.o.logger.warn(
          { crd: name, webhook: `${service.namespace}/${service.name}` },
          'the CRD calls another release\'s conversion webhook: caBundle left alone (docs/operator.md, "Versions")',
        );
        continue;
      }
      if (config?.caBundle === want) continue;
      await this.o.client.mergePatch(CRD, undefined, name, {
        spec: { conversion: { webhook: { clientConfig: { caBundle: want } } } },
      });
    }
  }
}

function usable(p: KeyPair): boolean {
  if (!p.cert || !p.key) return false;
  try {
    return new X509Certificate(p.cert) !== undefined;
  } catch {
    return false;
  }
}

function pairData(ca: KeyPair, serving: KeyPair, bundle: string[]): Record<string, string> {
  return {
    'ca.crt': ca.cert,
    'ca.key': ca.key,
    'tls.crt': serving.cert,
    'tls.key': serving.key,
    'ca-bundle.crt': bundle.join(''),
  };
}
