// Overview: bandwidth per product with its speed cap, daily usage over 30 days (uPlot, and the same
// figures as a table) and the Top targets of a day (docs/adr/0026), of the account or of one
// sub-user (docs/adr/0037).
import { AppError } from '#common/errors.ts';
import { PRODUCTS } from '#common/products.ts';
import { TARGET_RETENTION_DAYS } from '#common/target-stats.ts';
import { readThrottles } from '#api/modules/account/repo.ts';
import { subUserNames } from '#api/modules/sub-users/repo.ts';
import { readTargets } from '#api/modules/targets/repo.ts';
import { dayProblem, utcToday } from '#api/modules/targets/schemas.ts';
import { dailyUsage, type DailyUsage } from '#api/modules/usage/repo.ts';
import { productBalances } from '#api/modules/usage/service.ts';
import { html, jsonBlock, type Html } from '../html.ts';
import { gbText, layout, message, rateText, sentBySelect, table, type PageContext } from '../layout.ts';
import { get, type PageModule } from '../page.ts';

const CHART_DAYS = 30;
const DAY_MS = 86_400_000;
/** Rows of the Top targets table (the API gives them all). */
const TOP_TARGETS = 20;

export const overviewPage: PageModule = ({ pool, usage }) => ({
  nav: [{ href: '/', label: 'Overview' }],
  routes: [
    get('/', async ({ req, person, ctx, send }) => {
      const snapshot = await usage.snapshot(person.accountId);
      const balances = productBalances(snapshot.row);
      const caps = await readThrottles(pool, person.accountId);
      const products = PRODUCTS.map((product) => ({ product, ...balances[product], cap: caps.get(product) }));
      const daily = await dailyUsage(pool, person.accountId, CHART_DAYS);
      // Top targets: ?day=YYYY-MM-DD (the form's date field), today by default; a bad day is said
      // next to the field and today is shown.
      const asked = typeof req.query.day === 'string' && req.query.day !== '' ? req.query.day : undefined;
      const problem = asked === undefined ? undefined : dayProblem(asked);
      const date = asked !== undefined && !problem ? asked : utcToday();
      // ?subUser=<id>: only that sub-user's traffic (docs/adr/0037); one that is gone shows the account's.
      const subUsers = await subUserNames(pool, person.accountId);
      const subUser = subUsers.find((x) => x.id === req.query.subUser)?.id;
      const view = await readTargets(pool, person.accountId, date, undefined, subUser);
      if (!view) throw new AppError('ACCOUNT_NOT_FOUND');
      send(
        overviewView(ctx, {
          products,
          chart: chartData(daily, products),
          updatedAt: snapshot.row.computedAt.toISOString(),
          targets: {
            date,
            enabled: view.enabled,
            rows: view.targets,
            earliest: utcToday(Date.now() - (TARGET_RETENTION_DAYS - 1) * DAY_MS),
            today: utcToday(),
            subUsers,
            ...(subUser ? { subUser } : {}),
            ...(problem ? { error: `Day: ${problem}.` } : {}),
          },
        }),
      );
    }),
  ],
});

interface ProductUsage {
  product: string;
  total: number;
  used: number;
  remaining: number;
  /** The account's bandwidth cap on the product, bytes per second (docs/adr/0035); undefined: none set. */
  cap?: number | undefined;
}

interface ChartData {
  days: string[];
  products: string[];
  /** MB (10^6 bytes) per product (outer) per day (inner). */
  series: number[][];
}

interface TopTargets {
  date: string;
  enabled: boolean;
  rows: { domain: string; product: string; bytes: number; requests: number }[];
  /** The date field's bounds: the kept days. */
  earliest: string;
  today: string;
  /** The account's sub-users, to show one's traffic only (docs/adr/0037), and the one shown. */
  subUsers: { id: string; name: string }[];
  subUser?: string;
  error?: string;
}

function chartData(daily: DailyUsage[], products: { product: string; total: number }[]): ChartData {
  const days: string[] = [];
  const now = new Date();
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  for (let i = CHART_DAYS - 1; i >= 0; i--)
    days.push(new Date(today - i * DAY_MS).toISOString().slice(0, 10));
  const shown = PRODUCTS.filter(
    (p) => products.some((x) => x.product === p && x.total > 0) || daily.some((d) => d.product === p),
  );
  const index = new Map(days.map((d, i) => [d, i]));
  const series = shown.map(() => days.map(() => 0));
  for (const d of daily) {
    const i = index.get(d.day);
    const s = shown.indexOf(d.product as (typeof PRODUCTS)[number]);
    if (i !== undefined && s >= 0) series[s]![i] = Number((d.bytes / 1e6).toFixed(3));
  }
  return { days, products: shown, series };
}

function overviewView(
  ctx: PageContext,
  data: { products: ProductUsage[]; chart: ChartData; updatedAt: string; targets: TopTargets },
): Html {
  const bought = data.products.filter((p) => p.total > 0);
  const chartLabel = `Daily usage by product over the last ${data.chart.days.length} days, in MB`;
  return layout(
    ctx,
    'Overview',
    html`<section class="card" aria-labelledby="bandwidth-h">
        <h2 id="bandwidth-h">Bandwidth</h2>
        ${
          bought.length === 0
            ? html`<p>No bandwidth bought yet.</p>`
            : table({
                label: 'Bandwidth per product',
                caption: 'Bandwidth per product',
                columns: [
                  'Product',
                  { num: 'Bought' },
                  { num: 'Used' },
                  { num: 'Remaining' },
                  'Share used',
                  { num: 'Speed cap' },
                ],
                rows: bought.map(
                  (p) =>
                    html`<tr>
                      <th scope="row">${p.product}</th>
                      <td class="num">${gbText(p.total)}</td>
                      <td class="num">${gbText(p.used)}</td>
                      <td class="num">${gbText(p.remaining)}</td>
                      <td>
                        <meter
                          min="0"
                          max="${p.total}"
                          value="${Math.min(p.used, p.total)}"
                          aria-label="${p.product} share used"
                        >
                          ${Math.round((p.used / p.total) * 100)}%
                        </meter>
                      </td>
                      <td class="num">${p.cap === undefined ? 'plan default' : rateText(p.cap)}</td>
                    </tr>`,
                ),
              })
        }
        <p class="hint">
          Updated ${data.updatedAt.slice(0, 19).replace('T', ' ')} UTC; usage is folded from the gateways
          every few seconds. Speed cap: bytes per second over all your connections of the product, set by your
          provider (plan default: the product's own cap, if it has one).
        </p>
      </section>
      <section class="card" aria-labelledby="usage-h">
        <h2 id="usage-h">Usage over time</h2>
        <div id="usage-chart" data-label="${chartLabel}"></div>
        <script type="application/json" id="usage-data">
          ${jsonBlock(data.chart)}
        </script>
        <details>
          <summary>Usage as a table</summary>
          ${table({
            label: 'Usage as a table',
            caption: chartLabel,
            columns: ['Day', ...data.chart.products.map((p) => ({ num: p }))],
            rows: data.chart.days.map(
              (day, i) =>
                html`<tr>
                  <th scope="row">${day}</th>
                  ${data.chart.series.map((s) => html`<td class="num">${s[i] ?? 0}</td>`)}
                </tr>`,
            ),
          })}
        </details>
      </section>
      ${topTargets(data.targets)}`,
    { chart: true },
  );
}

function topTargets(t: TopTargets): Html {
  const shown = t.rows.slice(0, TOP_TARGETS);
  return html`<section class="card" aria-labelledby="targets-h">
    <h2 id="targets-h">Top targets</h2>
    ${message('error', t.error)}
    <form method="get" action="/">
      <label for="targets-day">Day (UTC)</label>
      <input id="targets-day" name="day" type="date" min="${t.earliest}" max="${t.today}" value="${t.date}" />
      ${sentBySelect('targets-sub-user', t.subUsers, t.subUser)}
      <button type="submit" class="secondary">Show</button>
    </form>
    ${
      !t.enabled
        ? html`<p>
            Target statistics are off for this account; turn them on under
            <a href="/settings#alerts">Settings</a>.
          </p>`
        : shown.length === 0
          ? html`<p>No traffic recorded on ${t.date}.</p>`
          : table({
              label: 'Top targets per domain',
              caption: `Top targets on ${t.date}${t.subUser ? ' of one sub-user' : ''}`,
              columns: ['Domain', 'Product', { num: 'Bytes' }, { num: 'Requests' }],
              rows: shown.map(
                (r) =>
                  html`<tr>
                    <th scope="row">${r.domain}</th>
                    <td>${r.product}</td>
                    <td class="num">${r.bytes.toLocaleString('en-US')}</td>
                    <td class="num">${r.requests.toLocaleString('en-US')}</td>
                  </tr>`,
              ),
            })
    }
    <p class="hint">
      Per registrable domain, never a path or a query; kept 30 days. The ${TOP_TARGETS} largest are shown (all
      of them: GET /api/v1/usage/targets).
    </p>
  </section>`;
}
