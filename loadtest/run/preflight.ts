// What a load-test run needs before it starts anything: k6 (scripts/install-tools.sh), HAProxy,
// Prometheus and promtool (Debian packages), and PgBouncer with `--pgbouncer` or the failover
// scenario (which also makes PostgreSQL clusters with the machine's initdb). A missing one is named in one line with how to
// install it, and nothing is started.
import { accessSync, constants } from 'node:fs';
import path from 'node:path';

const executable = (file: string) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** Whether `command` is an executable file in one of PATH's directories. */
export function onPath(command: string, envPath = process.env.PATH ?? ''): boolean {
  return envPath
    .split(path.delimiter)
    .filter(Boolean)
    .some((dir) => executable(path.join(dir, command)));
}

/** The first missing prerequisite, as one line naming what to install; undefined when all are there. */
export function missingPrerequisite(
  k6: string,
  envPath = process.env.PATH ?? '',
  needs: { pgbouncer?: boolean } = {},
): string | undefined {
  if (!executable(k6)) return `k6 not found at ${k6}: bash scripts/install-tools.sh builds it (or set K6)`;
  const debian: Array<[command: string, pkg: string]> = [
    ['haproxy', 'haproxy'],
    ['prometheus', 'prometheus'],
    ['promtool', 'prometheus'],
    ...(needs.pgbouncer ? ([['pgbouncer', 'pgbouncer']] as Array<[string, string]>) : []),
  ];
  for (const [command, pkg] of debian) {
    if (!onPath(command, envPath))
      return `${command} not found on PATH: apt-get install ${pkg} (Debian package ${pkg})`;
  }
  return undefined;
}
