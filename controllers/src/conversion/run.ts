// The conversion webhook as the controller process runs it: the certificate loop, then the HTTPS
// server on the first certificate, swapped in place on every later one.
import type { Registry } from 'prom-client';
import type { Logger } from '#common/logger.ts';
import type { KubeClient } from '../runtime/kube.ts';
import { WebhookCertificates, type CertificateOptions } from './certificates.ts';
import { ConversionWebhook } from './server.ts';
import type { KeyPair } from './x509.ts';

export interface WebhookOptions extends Omit<CertificateOptions, 'onServing' | 'client' | 'logger'> {
  client: KubeClient;
  logger: Logger;
  registry: Registry;
  port: number;
  host: string;
  /** How often the certificate Secret is checked (renewal, another replica's rotation). */
  checkIntervalMs?: number;
}

export interface RunningWebhook {
  webhook: ConversionWebhook;
  certificates: WebhookCertificates;
  /** The port once serving (the first certificate may come later with cert-manager). */
  port(): Promise<number>;
  stop(): Promise<void>;
}

export async function startWebhook(o: WebhookOptions): Promise<RunningWebhook> {
  const webhook = new ConversionWebhook(o.registry, o.logger);
  let listening: Promise<number> | undefined;
  let resolvePort: (port: number) => void = () => {};
  const port = new Promise<number>((resolve) => (resolvePort = resolve));
  const onServing = (pair: KeyPair) => {
    if (listening) return webhook.setCertificate(pair);
    listening = webhook.listen(pair, o.port, o.host);
    listening.then(
      (p) => {
        o.logger.info({ port: p }, 'conversion webhook listening');
        resolvePort(p);
      },
      (err: unknown) => o.logger.error({ err }, 'conversion webhook failed to listen'),
    );
  };
  const certificates = new WebhookCertificates({ ...o, onServing });
  await certificates.start(o.checkIntervalMs);
  if (listening) await listening;
  return {
    webhook,
    certificates,
    port: () => port,
    stop: async () => {
      certificates.stop();
      await webhook.close();
    },
  };
}
