// GET /api/v1/usage/history: traffic and how it ended, per hour or day (docs/api.md "Usage history").
import type { Pool } from '#common/db/pool.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { historyCsv, usageHistory } from '../history.ts';
import { usageHistoryQuery, usageHistorySchema, type UsageHistoryQuery } from '../history-schemas.ts';

export function usageHistoryRoute(pool: Pool): RouteDef {
  return defineRoute<undefined, Record<string, string>, UsageHistoryQuery>({
    method: 'get',
    path: '/usage/history',
    tag: 'usage',
    summary: 'Traffic per hour or day with the outcome of every request (JSON, or CSV)',
    description:
      'Bytes, requests and outcomes per bucket as the gateways counted them; they arrive with each ' +
      'gateway usage flush (seconds). Hours are kept 90 days and days 400 (configurable). One call ' +
      'covers at most 31 days of hours or 400 days. CSV with `format=csv` or `Accept: text/csv`.',
    auth: 'apiKey',
    query: usageHistoryQuery,
    response: usageHistorySchema,
    rawTypes: { 'text/csv': "one line per bucket, the JSON buckets' fields as columns (RFC 4180)" },
    errors: ['VALIDATION_FAILED'],
    handler: async ({ req, res, query }) => {
      const history = await usageHistory(pool, principal(res).accountId, query);
      const csv =
        query.format === 'csv' ||
        (query.format === undefined && req.accepts(['application/json', 'text/csv']) === 'text/csv');
      if (!csv) return { body: history };
      const name = `usage-${history.granularity}-${history.from.slice(0, 10)}-${history.to.slice(0, 10)}.csv`;
      return {
        raw: { contentType: 'text/csv; charset=utf-8', body: historyCsv(history) },
        headers: { 'Content-Disposition': `attachment; filename="${name}"` },
      };
    },
  });
}
