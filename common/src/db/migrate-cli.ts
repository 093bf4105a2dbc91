// `npm run migrate`: applies pending migrations to DATABASE_URL (through
// PROXYFLEET_DATABASE_SESSION_URL when set: the migration lock is a session lock), or to the
// embedded database in PROXYFLEET_DATA_DIR when DATABASE_URL is unset.
import { z } from 'zod';
import { baseEnv, parseConfig } from '../config.ts';
import { createLogger } from '../logger.ts';
import { openDatabase } from './open.ts';

const config = parseConfig(z.object(baseEnv));
const logger = createLogger('migrate', config.PROXYFLEET_LOG_LEVEL);
const db = await openDatabase({
  databaseUrl: config.DATABASE_URL,
  sessionUrl: config.PROXYFLEET_DATABASE_SESSION_URL,
  pooling: config.PROXYFLEET_DB_POOLING,
  dataDir: config.PROXYFLEET_DATA_DIR,
  poolSize: 1,
  component: 'migrate',
  logger,
});
await db.close();
