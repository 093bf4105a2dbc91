// A start-up failure the operator can fix: runMain prints its message (which says how) on stderr
// and exits 1, without a stack trace.
export class StartupError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartupError';
  }
}
