// What every composition root builds first: logger, metrics registry, health and shutdown.
import { ConfigError } from './config.ts';
import { Health } from './health.ts';
import { StartupError } from './startup-error.ts';
import { createLogger, type Logger } from './logger.ts';
import { createRegistry } from './metrics.ts';
import { createShutdown, exitOnSignals, SHUTDOWN_ORDER, type Shutdown } from './shutdown.ts';
import type { Registry } from 'prom-client';
import type { LevelWithSilent } from 'pino';

export interface Runtime {
  logger: Logger;
  registry: Registry;
  health: Health;
  shutdown: Shutdown;
}

export function createRuntime(
  component: string,
  config: { PROXYFLEET_LOG_LEVEL: LevelWithSilent; PROXYFLEET_SHUTDOWN_GRACE_SECONDS: number },
): Runtime {
  const logger = createLogger(component, config.PROXYFLEET_LOG_LEVEL);
  const registry = createRegistry(component);
  const health = new Health([registry]);
  const shutdown = createShutdown(logger, config.PROXYFLEET_SHUTDOWN_GRACE_SECONDS * 1000);
  shutdown.add({ name: 'readiness', run: () => health.startDraining(), order: SHUTDOWN_ORDER.FIRST });
  exitOnSignals(shutdown, logger);
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));
  return { logger, registry, health, shutdown };
}

type RuntimeConfig = Parameters<typeof createRuntime>[1];

/**
 * Runs an entrypoint: loads its configuration (an error prints every problem with its path and
 * exits 2), builds the runtime, then runs `main`. A start-up failure after that runs the
 * shutdown steps registered so far (an embedded database is stopped, not orphaned) and exits 1.
 */
export function runMain<C extends RuntimeConfig>(
  component: string,
  loadConfig: () => C,
  main: (config: C, runtime: Runtime) => Promise<void>,
): void {
  let config: C;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const runtime = createRuntime(component, config);
  main(config, runtime).catch(async (err: unknown) => {
    // A problem the operator can fix is a sentence on stderr, not a stack.
    if (err instanceof StartupError) process.stderr.write(`proxyfleet ${component}: ${err.message}\n`);
    else runtime.logger.fatal({ err }, 'start-up failed');
    await runtime.shutdown.run('start-up failed').catch(() => undefined);
    process.exit(1);
  });
}
