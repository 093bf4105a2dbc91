// The billing conditions of the low-bandwidth alert (docs/alerts.md, docs/adr/0073): decided in
// SQL (billing_check, on billing_alert_state), read here by the email renderer (when it sends, the
// alert is checked again and its numbers are those of that moment) and the APIs.
import { z } from 'zod';
import type { Pool, PoolClient } from '../db/pool.ts';
import { BYTES_PER_GB } from '../products.ts';
import { MAX_REFILL_GB } from './auto-refill.ts';

/** An optional absolute threshold: the alert also fires when this many GB or fewer remain. */
export const lowBandwidthFloorGb = z
  .number()
  .positive()
  .max(MAX_REFILL_GB)
  .refine((gb) => Math.round(gb * BYTES_PER_GB) >= 1, 'must be at least one byte (1e-9 GB)')
  .nullable()
  .describe('Also alert when this many GB or fewer remain; null: the percent alone');

export interface AlertState {
  totalBytes: number;
  /** Folded usage, or what gateways reported with their draws before the fold (billing_used). */
  usedBytes: number;
  /** total - used; negative by at most the overspend bound. */
  remainingBytes: number;
  alertOn: boolean;
  percent: number;
  floorBytes: number | null;
  thresholdBytes: number;
  /** remaining <= threshold: the alert's condition holds. */
  low: boolean;
}

/** The alert's conditions for one balance now; undefined when nothing was ever bought or used. */
export async function alertState(
  db: Pool | PoolClient,
  accountId: string,
  product: string,
): Promise<AlertState | undefined> {
  const { rows } = await db.query<AlertState>(
    `SELECT total_bytes AS "totalBytes", used_bytes AS "usedBytes", remaining_bytes AS "remainingBytes",
            alert_on AS "alertOn", percent, floor_bytes AS "floorBytes", threshold_bytes AS "thresholdBytes", low
       FROM billing_alert_state($1, $2)`,
    [accountId, product],
  );
  return rows[0];
}
