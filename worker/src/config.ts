import { z } from 'zod';
import { baseEnv, parseConfig, port, type Env } from '../../common/src/config.ts';

export const workerEnv = {
  PROXYFLEET_HEALTH_PORT: port(9091),
};

/** Email alerts (docs/alerts.md); dev reads them too. SMTP unset: alerts are queued, not sent. */
export const emailEnv = {
  PROXYFLEET_SMTP_URL: z
    .string()
    .regex(/^smtps?:\/\//, 'must be an smtp:// or smtps:// URL')
    .optional(),
  PROXYFLEET_EMAIL_FROM: z.string().min(1).default('proxyfleet <alerts@localhost>'),
};

export const workerSchema = z.object({ ...baseEnv, ...workerEnv, ...emailEnv });
export type WorkerConfig = z.infer<typeof workerSchema>;
export const loadWorkerConfig = (env?: Env) => parseConfig(workerSchema, env);
