// Process glue for the CLI (bin/proxyfleet.js): real argv, stdout/stderr, fetch and exit code.
import { existsSync } from 'node:fs';
import { runCli } from './main.ts';

export async function run(): Promise<void> {
  // The same .env that `npm start` reads (node --env-file-if-exists=.env); set variables win.
  if (existsSync('.env')) process.loadEnvFile('.env');
  process.exitCode = await runCli(process.argv.slice(2), {
    out: (t) => process.stdout.write(t),
    err: (t) => process.stderr.write(t),
    fetch,
  });
}
