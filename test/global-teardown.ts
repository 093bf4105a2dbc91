// Drops the databases this run created and stops the embedded server, if one was started.
import { rm } from 'node:fs/promises';
import pg from 'pg';
import { withDatabase } from './global-setup.ts';

export default async function globalTeardown(): Promise<void> {
  const serverUrl = process.env.PROXYFLEET_TEST_SERVER_URL;
  const runId = process.env.PROXYFLEET_TEST_RUN_ID;
  if (serverUrl && runId) {
    const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ datname: string }>(
        `SELECT datname FROM pg_database WHERE datname LIKE 'pf\\_%' AND datname LIKE $1`,
        [`%${runId}%`],
      );
      for (const { datname } of rows) {
        await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
      }
    } finally {
      await admin.end();
    }
  }
  await globalThis.__PROXYFLEET_EMBEDDED__?.stop();
  const dir = globalThis.__PROXYFLEET_EMBEDDED_DIR__;
  if (dir) await rm(dir, { recursive: true, force: true });
}
