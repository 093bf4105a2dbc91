// jest global setup: one PostgreSQL server for the run (DATABASE_URL's, or an embedded one when it
// is unset), one template database with every migration applied, from which each test file
// clones its own database in milliseconds (test/db.ts).
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '#common/db/embedded.ts';
import { migrate } from '#common/db/migrate.ts';
import { createLogger } from '#common/logger.ts';

declare global {
  var __PROXYFLEET_EMBEDDED__: EmbeddedDatabase | undefined;
  var __PROXYFLEET_EMBEDDED_DIR__: string | undefined;
}

export default async function globalSetup(): Promise<void> {
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-test-'));
    globalThis.__PROXYFLEET_EMBEDDED_DIR__ = dir;
    globalThis.__PROXYFLEET_EMBEDDED__ = await startEmbeddedPostgres(dir, createLogger('test', 'warn'));
    serverUrl = globalThis.__PROXYFLEET_EMBEDDED__.url;
  }
  const runId = `${process.pid}_${Date.now().toString(36)}`;
  const template = `pf_tmpl_${runId}`;
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${template}`);
  } finally {
    await admin.end();
  }
  await migrate(withDatabase(serverUrl, template));
  process.env.PROXYFLEET_TEST_SERVER_URL = serverUrl;
  process.env.PROXYFLEET_TEST_TEMPLATE = template;
  process.env.PROXYFLEET_TEST_RUN_ID = runId;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
