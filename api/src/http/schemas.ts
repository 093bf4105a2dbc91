// Request schemas that several features share (ids in paths, the account an operator names, bounds
// that more than one request obeys). Features import them from here, never from each other's
// schemas, so no feature depends on admin/ for a uuid (docs/adr/0062).
import { z } from 'zod';
import { MAX_THROTTLE_BYTES_PER_SECOND, MIN_THROTTLE_BYTES_PER_SECOND } from '#common/throttle.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const uuid = z.string().regex(UUID);

/** A path to one invoice: /api/v1/invoices/:invoiceId/pdf, /admin/v1/invoices/:invoiceId/paid. */
export const invoiceParams = z.object({ invoiceId: uuid });

/** An operator's path to one account: /admin/v1/accounts/:id/... */
export const accountParams = z.object({ id: uuid });

/** A bandwidth cap in bytes per second, as account_throttles and sub_users store it; null: none. */
export const throttleRate = z
  .number()
  .int()
  .min(MIN_THROTTLE_BYTES_PER_SECOND)
  .max(MAX_THROTTLE_BYTES_PER_SECOND)
  .nullable();

/** The most one purchase (or one traffic limit) may name (a typo guard, not a business rule): 1 PB. */
export const MAX_PURCHASE_GB = 1_000_000;
