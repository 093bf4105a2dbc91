// A secret kept in a file of the data directory (mode 0600): read it, or create it once.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

export async function readOrCreateSecretFile(
  file: string,
  generate: () => string = () => randomBytes(24).toString('base64url'),
): Promise<{ value: string; created: boolean }> {
  try {
    const value = (await readFile(file, 'utf8')).trim();
    if (value) return { value, created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(path.dirname(file), { recursive: true });
  const value = generate();
  await writeFile(file, `${value}\n`, { mode: 0o600 });
  return { value, created: true };
}
