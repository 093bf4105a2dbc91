// PostgreSQL and PgBouncer refuse to run as root. A test or load test started as root runs them as
// the user 'postgres' (the Debian packages create it); as anyone else, as that user.
import { execFileSync } from 'node:child_process';
import { chown } from 'node:fs/promises';

export interface RunAs {
  uid: number;
  gid: number;
  name: string;
}

const SERVER_USER = 'postgres';

/** The user a server started from this process runs as: 'postgres' when we are root, else none. */
export function serverUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, SERVER_USER], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g'), name: SERVER_USER };
  } catch (err) {
    throw new Error(
      `running as root, PostgreSQL and PgBouncer run as the user '${SERVER_USER}', which does not exist ` +
        '(install the Debian package postgresql or pgbouncer, which create it)',
      { cause: err },
    );
  }
}

/** Hands `paths` to the server's user (no-op when not root). */
export async function giveToServerUser(user: RunAs | undefined, ...paths: string[]): Promise<void> {
  if (!user) return;
  for (const p of paths) await chown(p, user.uid, user.gid);
}
