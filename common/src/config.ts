// Configuration: one zod schema per entrypoint, parsed once at start, every problem reported with
// its path, then frozen. This is the only module (with each entrypoint's config.ts) that reads
// process.env.
import { z } from 'zod';

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export type Env = Readonly<Record<string, string | undefined>>;

/** Parses `env` with `schema`; on failure throws a ConfigError naming every bad variable. */
export function parseConfig<S extends z.ZodType>(schema: S, env: Env = process.env): Readonly<z.infer<S>> {
  const result = schema.safeParse(env);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((issue) => `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`),
    );
  }
  return deepFreeze(result.data);
}

function deepFreeze<T>(value: T): T {
  // Buffers (the encryption key) cannot be frozen; they are never handed out for writing.
  if (value && typeof value === 'object' && !ArrayBuffer.isView(value) && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

// Building blocks shared by the entrypoint schemas. Environment values are strings; these coerce
// and validate them.
export const port = (fallback: number) => z.coerce.number().int().min(0).max(65_535).default(fallback);
export const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);
export const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');
export const logLevel = z
  .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  .default('info');
export const postgresUrl = z
  .string()
  .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
  .optional();
/** A comma-separated list of CIDR ranges; validated by the consumer that parses them. */
export const cidrList = z
  .string()
  .default('')
  .transform((s) =>
    s
      .split(',')
      .map((part) => part.trim())
      .filter(Boolean),
  );

/** Variables every entrypoint understands. */
export const baseEnv = {
  /** Every pooled query (docs/adr/0068: may be a transaction-mode pooler, see PROXYFLEET_DB_POOLING). */
  DATABASE_URL: postgresUrl,
  /**
   * The session connections: the change feed's LISTEN, the worker's leader lock, migrations. A
   * direct connection or a session-mode pool; default DATABASE_URL (docs/adr/0068).
   */
  PROXYFLEET_DATABASE_SESSION_URL: postgresUrl,
  /**
   * How DATABASE_URL's connections are pooled: `session` (a direct connection or a session-mode
   * pool) or `transaction` (PgBouncer pool_mode=transaction: no session state is sent with a
   * connection, and PROXYFLEET_DATABASE_SESSION_URL is required).
   */
  PROXYFLEET_DB_POOLING: z.enum(['session', 'transaction']).default('session'),
  PROXYFLEET_DATA_DIR: z.string().min(1).default('./.proxyfleet'),
  PROXYFLEET_LOG_LEVEL: logLevel,
  PROXYFLEET_HEALTH_HOST: z.string().default('0.0.0.0'),
  PROXYFLEET_SHUTDOWN_GRACE_SECONDS: positiveInt(25),
  PROXYFLEET_DB_POOL_SIZE: positiveInt(10),
  /**
   * Longest wait for the database's answer to one query before it fails and its connection is
   * dropped (a connection that hangs); the server's statement_timeout is derived from it (pool.ts).
   */
  PROXYFLEET_DB_QUERY_TIMEOUT_MS: z.coerce.number().int().min(1_000).default(20_000),
};

/**
 * The change relay (docs/adr/0105) that API and gateway processes take their changes from, with
 * the rows: `ws://host:port/changes`, several comma-separated (tried in turn). Unset: the process
 * LISTENs itself and reads what changed (a single-process setup needs no relay).
 *
 * A value still holding `$(` is a Kubernetes variable reference the kubelet could not expand: the
 * chart's `relay.address=serviceEnv` names the relay Service's environment variables, which a pod
 * created before that Service lacks. Refused, so the process stops at once with this message and
 * its restart (which gets the variables) connects, instead of retrying an address that never works.
 */
export const relayUrlEnv = {
  PROXYFLEET_RELAY_URL: z
    .string()
    .refine(
      (s) => !s.includes('$('),
      'holds an unexpanded Kubernetes variable reference $(...): the relay Service did not exist when ' +
        'this container started (chart value relay.address=serviceEnv); it starts again with the variable set',
    )
    .regex(/^wss?:\/\/[^,\s]+(,\s*wss?:\/\/[^,\s]+)*$/, 'one or more ws:// URLs, comma-separated')
    .optional(),
};

/** 32 bytes as 64 hex characters or base64: the key that encrypts proxy passwords at rest. */
export const encryptionKey = z.string().transform((s, ctx) => {
  const buf = /^[0-9a-fA-F]{64}$/.test(s) ? Buffer.from(s, 'hex') : Buffer.from(s, 'base64');
  if (buf.length !== 32) {
    ctx.addIssue({ code: 'custom', message: 'must be 32 bytes, as 64 hex characters or base64' });
    return z.NEVER;
  }
  return buf;
});
