// The plugin's one error type, apart from everything else so that --help and wrong usage are
// answered without loading the Kubernetes client.

/** An error whose message is the whole story for the person running the command. */
export class PluginError extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}
