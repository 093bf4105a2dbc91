// Process glue for the CLI (bin/proxyfleet.js): real argv, stdout/stderr, fetch and exit code.
import { runCli } from './main.ts';

export async function run(): Promise<void> {
  process.exitCode = await runCli(process.argv.slice(2), {
    out: (t) => process.stdout.write(t),
    err: (t) => process.stderr.write(t),
    fetch,
  });
}
