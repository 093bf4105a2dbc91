// Graceful shutdown: on SIGTERM, SIGINT or SIGHUP run the steps in order (stop accepting, drain, flush,
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

export function createShutdown(
  logger: Logger,
  graceMs: number,
  exit: (code: number) => void = (code) => process.exit(code),
): Shutdown {
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

/**
 * A terminal's Ctrl-C reaches us twice: from the terminal (the whole foreground process group) and
 * forwarded by `npm start` (npm's run-script passes SIGINT and SIGTERM on to its child). A repeat
 * within this window is that same request; a later one is an operator insisting.
 */
export const SIGNAL_REPEAT_WINDOW_MS = 1_000;
/** How often `exitWhenParentExits` looks at the parent pid. */
const PARENT_POLL_MS = 250;

/**
 * Wires SIGTERM, SIGINT and SIGHUP (a closed terminal) to the shutdown, then exits 0 when it
 * completes. A second signal after SIGNAL_REPEAT_WINDOW_MS forces exit 1.
 */
export function exitOnSignals(shutdown: Shutdown, logger: Logger, now: () => number = Date.now): void {
  let first: number | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (first !== undefined) {
      if (now() - first < SIGNAL_REPEAT_WINDOW_MS) return;
      logger.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    first = now();
    shutdown.run(signal).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('SIGHUP', onSignal);
}

/**
 * Runs the shutdown when our parent goes away (`kill <npm pid>` or a closed terminal kills npm
 * but not its child): the process is then re-parented, and nothing else would ever stop it.
 */
export function exitWhenParentExits(shutdown: Shutdown, logger: Logger): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    logger.warn({ parent }, 'parent process exited');
    shutdown.run('parent exited').then(
      () => process.exit(0),
      () => process.exit(1),
    );
  }, PARENT_POLL_MS);
  timer.unref();
}
