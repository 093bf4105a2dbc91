// One process per data directory: `<data dir>/lock` holds the owner's pid and its start time (so a
// recycled pid does not keep a dead owner's lock). A second process refuses to start and names the
// holder; a lock whose holder is gone is taken over. docs/adr/0007-dev-process-lifecycle.md.
import { readFileSync } from 'node:fs';
import { open, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../startup-error.ts';

export interface DataDirLock {
  readonly file: string;
  release(): Promise<void>;
}

interface Holder {
  pid: number;
  started: string;
}

/** The kernel's start time of a process (field 22 of /proc/<pid>/stat), or '' off Linux. */
function startTime(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

function running(holder: Holder): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    // EPERM: the pid exists but belongs to another user, so it is alive.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const now = startTime(holder.pid);
  return holder.started === '' || now === '' || now === holder.started;
}

async function readHolder(file: string): Promise<Holder | undefined> {
  try {
    const [pid, started] = (await readFile(file, 'utf8')).trim().split(' ');
    const n = Number(pid);
    return Number.isInteger(n) && n > 0 ? { pid: n, started: started ?? '' } : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

const ATTEMPTS = 3;

export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const file = path.join(dataDir, 'lock');
  const content = `${process.pid} ${startTime(process.pid)}\n`;
  for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
    try {
      const handle = await open(file, 'wx', 0o644);
      await handle.writeFile(content);
      await handle.close();
      return {
        file,
        async release() {
          const holder = await readHolder(file).catch(() => undefined);
          if (holder?.pid === process.pid) await unlink(file).catch(() => undefined);
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = await readHolder(file);
    if (holder && holder.pid !== process.pid && running(holder)) {
      throw new StartupError(
        `the data directory ${dataDir} is in use by another proxyfleet process (pid ${holder.pid}); ` +
          `stop that one, or give this one its own PROXYFLEET_DATA_DIR`,
      );
    }
    // Stale (its holder is gone, or it is ours from a restart in this process): move it aside
    // atomically, so that of two processes taking it over at once only one removes it.
    const aside = `${file}.stale-${process.pid}`;
    await rename(file, aside).then(
      () => unlink(aside),
      (err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      },
    );
  }
  throw new StartupError(`could not take the lock ${file}: another process keeps taking it`);
}
