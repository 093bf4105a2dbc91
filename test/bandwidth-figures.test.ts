// One rounding rule for an amount of bandwidth, in the API, on the dashboard and in the emails
// (docs/api.md, "Remaining bandwidth"): the three show the same figure for the same bytes, and
// none shows "0 GB" while bytes remain. 246,388 B left was "0 GB" on the dashboard and "0.24 MB"
// in the low-bandwidth email while the API said 0.
import { expect, test } from '@jest/globals';
import { bandwidthIn } from '#common/billing/remaining.ts';
import { gbText } from '#api/modules/dashboard/layout.ts';
import { formatBytes } from '../worker/src/jobs/render.ts';

test.each([246_388, 1, 999_999_999, 1_999_999_999, 1_750_000_000, 0])(
  '%d B: the same figure on the dashboard and in the emails as in the API',
  (bytes) => {
    const api = bandwidthIn('GB', bytes);
    const text = `${api.toLocaleString('en-US', { maximumFractionDigits: 9 })} GB`;
    expect(gbText(bytes)).toBe(text);
    expect(formatBytes(bytes)).toBe(text);
    if (bytes > 0) expect(text).not.toBe('0 GB');
  },
);
