// Usage: the account's traffic over a range the customer picks (UTC days, per hour or per day, of
// the whole account or one sub-user), as a chart of requests by outcome, a table of outcomes with
// the exact meaning of each, and "Download CSV": the API's usage history (docs/api.md "Usage
// history", docs/adr/0103), read through the same functions.
import { AppError } from '#common/errors.ts';
import { subUserNames } from '#api/modules/sub-users/repo.ts';
import { historyCsv, usageHistory } from '#api/modules/usage/history.ts';
import {
  usageHistoryQuery,
  type HistoryCounts,
  type UsageHistory,
} from '#api/modules/usage/history-schemas.ts';
import { formProblem } from '../forms.ts';
import { html, jsonBlock, type Html } from '../html.ts';
import { layout, message, sentBySelect, table, type PageContext } from '../layout.ts';
import { get, type PageModule } from '../page.ts';

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const LABELS = { from: 'From', to: 'To', granularity: 'Per', subUser: 'Sent by' } as const;
const utcDay = (t: number) => new Date(t).toISOString().slice(0, 10);

/** The outcome rows of the table: label, what it means, and its count. */
const OUTCOMES: readonly [string, string, (c: HistoryCounts) => number][] = [
  ['Succeeded', 'relayed: the origin answered (any status) or the tunnel ran to its end', (c) => c.succeeded],
  [
    'Refused: no bandwidth',
    "402: nothing left on the product, or the sub-user's limit reached",
    (c) => c.refused.noBandwidth,
  ],
  [
    'Refused: bad credentials',
    "a wrong password for your username or a sub-user's",
    (c) => c.refused.badCredentials,
  ],
  [
    'Refused: throttled',
    '429: too many connections at once, or too many failed sign-ins',
    (c) => c.refused.throttled,
  ],
  [
    'Refused: target not allowed',
    '403: a destination or port the gateway does not serve',
    (c) => c.refused.targetNotAllowed,
  ],
  ['Refused: no exit', '503: no exit serves the requested location', (c) => c.refused.noExit],
  [
    'Upstream: connect error',
    'the destination or exit refused, reset or did not resolve',
    (c) => c.upstreamFailures.connectError,
  ],
  [
    'Upstream: timeout',
    'the destination or exit did not connect or answer in time',
    (c) => c.upstreamFailures.timeout,
  ],
  ['Other', 'you left first, the answer was cut short, a malformed request', (c) => c.other],
];

interface Picked {
  from: string;
  to: string;
  granularity: string;
  subUser: string;
}

/** The form as asked (?from&to: UTC days, both included; ?granularity; ?subUser), default the last 7 days. */
function picked(query: Record<string, unknown>): Picked {
  const text = (name: string) => (typeof query[name] === 'string' ? query[name].trim() : '');
  const today = utcDay(Date.now());
  return {
    from: text('from') || utcDay(Date.now() - 6 * DAY_MS),
    to: text('to') || today,
    granularity: text('granularity') || 'day',
    subUser: text('subUser'),
  };
}

/** The history the form names, or the refusal worded as the API's, field by label. */
async function read(
  pool: Parameters<typeof usageHistory>[0],
  accountId: string,
  p: Picked,
): Promise<{ history?: UsageHistory; error?: string }> {
  // The page's "To" day is included: the range ends at its end, or now for today's hours.
  const end = Date.parse(`${p.to}T00:00:00Z`) + DAY_MS;
  const nowEnd = Math.floor(Date.now() / HOUR_MS) * HOUR_MS + HOUR_MS;
  // A day the calendar has not (2026-02-30 rolls over) goes on as typed, for the schema to refuse.
  const real = !Number.isNaN(end) && utcDay(end - DAY_MS) === p.to;
  const to = !real ? p.to : new Date(p.granularity === 'hour' ? Math.min(end, nowEnd) : end);
  const form = usageHistoryQuery.safeParse({
    from: p.from,
    to: typeof to === 'string' ? to : to.toISOString(),
    granularity: p.granularity,
    ...(p.subUser ? { subUser: p.subUser } : {}),
  });
  if (!form.success) return { error: formProblem(form.error, LABELS) };
  try {
    return { history: await usageHistory(pool, accountId, form.data) };
  } catch (err) {
    if (err instanceof AppError && err.code === 'VALIDATION_FAILED')
      return { error: err.message.replace(/^Invalid request: /, '') };
    throw err;
  }
}

export const usagePage: PageModule = ({ pool }) => ({
  nav: [{ href: '/usage', label: 'Usage' }],
  routes: [
    get('/usage', async ({ req, person, ctx, send }) => {
      const p = picked(req.query);
      const subUsers = await subUserNames(pool, person.accountId);
      const { history, error } = await read(pool, person.accountId, p);
      send(usageView(ctx, { picked: p, subUsers, history, error }), error ? 400 : 200);
    }),
    get('/usage/csv', async ({ req, res, person, ctx, send }) => {
      const p = picked(req.query);
      const { history, error } = await read(pool, person.accountId, p);
      if (!history) {
        const subUsers = await subUserNames(pool, person.accountId);
        return send(usageView(ctx, { picked: p, subUsers, error }), 400);
      }
      res
        .status(200)
        .type('text/csv; charset=utf-8')
        .set('Content-Disposition', `attachment; filename="usage-${p.granularity}-${p.from}-${p.to}.csv"`)
        .set('Cache-Control', 'no-store')
        .send(historyCsv(history));
    }),
  ],
});

function usageView(
  ctx: PageContext,
  data: {
    picked: Picked;
    subUsers: { id: string; name: string }[];
    history?: UsageHistory | undefined;
    error?: string | undefined;
  },
): Html {
  const { picked: p, history } = data;
  const csv = new URLSearchParams({
    from: p.from,
    to: p.to,
    granularity: p.granularity,
    ...(p.subUser ? { subUser: p.subUser } : {}),
  });
  return layout(
    ctx,
    'Usage',
    html`<section class="card" aria-labelledby="range-h">
        <h2 id="range-h">Range</h2>
        ${message('error', data.error)}
        <form method="get" action="/usage">
          <label for="usage-from">From (UTC day)</label>
          <input id="usage-from" name="from" type="date" value="${p.from}" />
          <label for="usage-to">To (UTC day, included)</label>
          <input id="usage-to" name="to" type="date" value="${p.to}" />
          <label for="usage-granularity">Per</label>
          <select id="usage-granularity" name="granularity">
            <option value="day" ${p.granularity === 'day' ? html` selected` : ''}>Day</option>
            <option value="hour" ${p.granularity === 'hour' ? html` selected` : ''}>Hour</option>
          </select>
          ${sentBySelect('usage-sub-user', data.subUsers, p.subUser)}
          <button type="submit" class="secondary">Show</button>
        </form>
        <p class="hint">
          Hours are kept 90 days and days 400; one view covers at most 31 days of hours or 400 days.
        </p>
      </section>
      ${history ? results(history, csv) : ''}`,
    { chart: true },
  );
}

function results(h: UsageHistory, csv: URLSearchParams): Html {
  const label = `Requests per ${h.granularity} by outcome`;
  const chart = {
    times: h.buckets.map((b) => Date.parse(b.start) / 1000),
    labels: ['Succeeded', 'Refused', 'Upstream failures', 'Other'],
    unit: 'requests',
    series: [
      h.buckets.map((b) => b.succeeded),
      h.buckets.map((b) => Object.values(b.refused).reduce((n, v) => n + v, 0)),
      h.buckets.map((b) => b.upstreamFailures.connectError + b.upstreamFailures.timeout),
      h.buckets.map((b) => b.other),
    ],
  };
  const t = h.totals;
  return html`<section class="card" aria-labelledby="chart-h">
      <h2 id="chart-h">Requests over time</h2>
      <div id="usage-chart" data-label="${label}"></div>
      <script type="application/json" id="usage-data">
        ${jsonBlock(chart)}
      </script>
      <p><a href="/usage/csv?${csv.toString()}" download>Download CSV</a></p>
    </section>
    <section class="card" aria-labelledby="outcomes-h">
      <h2 id="outcomes-h">Outcomes</h2>
      <p>
        ${t.requests.toLocaleString('en-US')} requests, ${t.bytesUp.toLocaleString('en-US')} bytes up and
        ${t.bytesDown.toLocaleString('en-US')} bytes down from ${h.from.slice(0, 16).replace('T', ' ')} to
        ${h.to.slice(0, 16).replace('T', ' ')} UTC.
      </p>
      ${table({
        label: 'Outcomes',
        caption: 'Requests by outcome over the range',
        columns: ['Outcome', { num: 'Requests' }, 'Meaning'],
        rows: OUTCOMES.map(
          ([name, meaning, count]) =>
            html`<tr>
              <th scope="row">${name}</th>
              <td class="num">${count(t).toLocaleString('en-US')}</td>
              <td>${meaning}</td>
            </tr>`,
        ),
      })}
      <p class="hint">
        Origin answers to plain HTTP requests: 2xx ${t.httpStatus['2xx']}, 3xx ${t.httpStatus['3xx']}, 4xx
        ${t.httpStatus['4xx']}, 5xx ${t.httpStatus['5xx']} (tunnels carry their own). Figures arrive with the
        gateways' flushes, within seconds.
      </p>
      <details>
        <summary>Per ${h.granularity} as a table</summary>
        ${table({
          label: `Per ${h.granularity}`,
          caption: label,
          columns: [
            'Start (UTC)',
            { num: 'Requests' },
            { num: 'Succeeded' },
            { num: 'Refused' },
            { num: 'Upstream failures' },
            { num: 'Other' },
          ],
          rows: h.buckets.map(
            (b, i) =>
              html`<tr>
                <th scope="row">${b.start.slice(0, 16).replace('T', ' ')}</th>
                <td class="num">${b.requests}</td>
                ${chart.series.map((s) => html`<td class="num">${s[i] ?? 0}</td>`)}
              </tr>`,
          ),
        })}
      </details>
    </section>`;
}
