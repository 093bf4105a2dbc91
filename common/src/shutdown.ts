// Graceful shutdown: on SIGTERM or SIGINT run the steps in order (stop accepting, drain, flush,
// close pools), bounded by the grace period; a second signal or the deadline forces exit 1.
import type { Logger } from './logger.ts';

export interface ShutdownStep {
  name: string;
  run: () => Promise<void> | void;
  /** Steps run by ascending order, then registration order. Stores (the database) use LAST. */
  order?: number;
}

export const SHUTDOWN_ORDER = { FIRST: -100, DEFAULT: 0, LAST: 100 } as const;

export interface Shutdown {
  /** Steps run by `order`, then in registration order. */
  add(step: ShutdownStep): void;
  /** Runs the steps once; later calls return the same promise. */
  run(reason: string): Promise<void>;
}

export function createShutdown(logger: Logger, graceMs: number, exit: (code: number) => void = process.exit): Shutdown {
  const steps: ShutdownStep[] = [];
  let running: Promise<void> | undefined;
  const run = (reason: string): Promise<void> => {
    running ??= (async () => {
      logger.info({ reason, graceMs }, 'shutting down');
      const deadline = setTimeout(() => {
        logger.error({ graceMs }, 'shutdown grace period exceeded, exiting');
        exit(1);
      }, graceMs);
      deadline.unref();
      const ordered = [...steps].sort(
        (a, b) => (a.order ?? SHUTDOWN_ORDER.DEFAULT) - (b.order ?? SHUTDOWN_ORDER.DEFAULT),
      );
      for (const step of ordered) {
        try {
          await step.run();
        } catch (err) {
          logger.error({ err, step: step.name }, 'shutdown step failed');
        }
      }
      clearTimeout(deadline);
      logger.info('shutdown complete');
    })();
    return running;
  };
  return { add: (step) => void steps.push(step), run };
}

/** Wires SIGTERM/SIGINT to the shutdown, then exits 0 when it completes. */
export function exitOnSignals(shutdown: Shutdown, logger: Logger): void {
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    shutdown.run(signal).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
