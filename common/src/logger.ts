// JSON logs with pino. Credentials never reach a log line: the redaction paths below cover every
// place a key, token or password can appear in what we log (request headers, bodies, errors).
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'key',
  '*.key',
  'password',
  '*.password',
  'proxyPassword',
  '*.proxyPassword',
  'token',
  '*.token',
  'adminToken',
  '*.adminToken',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["proxy-authorization"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers["proxy-authorization"]',
  'databaseUrl',
  '*.databaseUrl',
];

export function createLogger(
  component: string,
  level: LevelWithSilent,
  destination?: pino.DestinationStream,
): Logger {
  const options = {
    level,
    base: { component },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** Removes the password from a postgres URL so it can be logged. */
export function safeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '[unparseable url]';
  }
}
