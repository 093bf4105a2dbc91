// The dashboard's pages: typed functions from data to escaped HTML (html.ts). Every form works
// without JavaScript (a confirmation page stands in for each dialog); client/dashboard.js adds
// copy, reveal, download, dialogs and the chart.
import type { z } from 'zod';
import { PRODUCTS } from '#common/products.ts';
import type { AutoRefillSettings } from '#common/billing/auto-refill.ts';
import type { KeyRecord } from '#common/accounts/keys.ts';
import type { IspProxy } from '../proxies/schemas.ts';
import type { AllowlistEntry } from '../ip-allowlist/schemas.ts';
import type { SubUser } from '../sub-users/schemas.ts';
import type { AlertsRow } from '../admin/repo.ts';
import type { AutoRefillLine, InvoiceLine } from './billing.ts';
import { html, jsonBlock, type Html } from './html.ts';

export interface PageContext {
  assets: { script: string; style: string; uplotStyle: string };
  /** CSRF token for this page's forms. */
  csrf: string;
  /** Signed in: the navigation and "Sign out" are shown. */
  email?: string;
  /** Path of the current section (for aria-current). */
  current?: string;
}

const NAV = [
  { href: '/', label: 'Overview' },
  { href: '/proxies', label: 'Proxies' },
  { href: '/sub-users', label: 'Sub-users' },
  { href: '/keys', label: 'API keys' },
  { href: '/alerts', label: 'Alerts' },
  { href: '/billing', label: 'Billing' },
] as const;

export const csrfField = (ctx: PageContext) => html`<input type="hidden" name="_csrf" value="${ctx.csrf}" />`;

export function layout(
  ctx: PageContext,
  title: string,
  body: Html,
  options: { narrow?: boolean; chart?: boolean } = {},
): Html {
  const signedIn = ctx.email !== undefined;
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · proxyfleet</title>
        <link rel="stylesheet" href="${ctx.assets.style}" />
        ${options.chart ? html`<link rel="stylesheet" href="${ctx.assets.uplotStyle}" />` : ''}
        <script type="module" src="${ctx.assets.script}"></script>
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <header class="top">
          <p class="brand">proxyfleet</p>
          ${
            signedIn
              ? html`<nav aria-label="Dashboard">
                    <ul>
                      ${NAV.map(
                        (n) =>
                          html`<li>
                            <a href="${n.href}" ${ctx.current === n.href ? html` aria-current="page"` : ''}
                              >${n.label}</a
                            >
                          </li>`,
                      )}
                    </ul>
                  </nav>
                  <form class="signout" method="post" action="/sign-out">
                    ${csrfField(ctx)}<span class="hint">${ctx.email} </span
                    ><button class="secondary" type="submit">Sign out</button>
                  </form>`
              : ''
          }
        </header>
        <main id="main" ${options.narrow ? html` class="narrow"` : ''}>
          <h1>${title}</h1>
          <div id="live-status" class="visually-hidden" role="status" aria-live="polite"></div>
          ${body}
        </main>
      </body>
    </html>`;
}

const message = (kind: 'error' | 'success' | 'notice', text: string | undefined) =>
  text
    ? html`<div class="${kind}" ${kind === 'error' ? html`role="alert"` : html`role="status"`}>${text}</div>`
    : '';

// --- signed out ---

export function signInPage(
  ctx: PageContext,
  state: { email?: string; error?: string; notice?: string } = {},
): Html {
  return layout(
    ctx,
    'Sign in',
    html`${message('error', state.error)}${message('success', state.notice)}
      <form method="post" action="/sign-in" novalidate>
        ${csrfField(ctx)}
        <label for="email">Email</label>
        <input
          id="email"
          name="email"
          type="email"
          autocomplete="username"
          required
          value="${state.email ?? ''}"
        />
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required />
        <button type="submit">Sign in</button>
      </form>
      <p><a href="/forgot-password">Forgot password?</a></p>`,
    { narrow: true },
  );
}

export function forgotPage(ctx: PageContext, state: { sent?: boolean; error?: string } = {}): Html {
  return layout(
    ctx,
    'Reset your password',
    state.sent
      ? html`${message('success', 'If an account exists for that email, we have sent it a link to set a new password. The link works once, for one hour.')}
          <p><a href="/sign-in">Back to sign in</a></p>`
      : html`${message('error', state.error)}
          <p>Enter the email of your account and we will email you a link to set a new password.</p>
          <form method="post" action="/forgot-password">
            ${csrfField(ctx)}
            <label for="email">Email</label>
            <input id="email" name="email" type="email" autocomplete="username" required />
            <button type="submit">Send reset link</button>
          </form>
          <p><a href="/sign-in">Back to sign in</a></p>`,
    { narrow: true },
  );
}

export function setPasswordPage(
  ctx: PageContext,
  state: { token: string; email: string; error?: string },
): Html {
  return layout(
    ctx,
    'Set your password',
    html`${message('error', state.error)}
      <p>Choose the password for <strong>${state.email}</strong>.</p>
      <form method="post" action="/set-password" novalidate>
        ${csrfField(ctx)}
        <input type="hidden" name="token" value="${state.token}" />
        <input type="hidden" name="username" value="${state.email}" autocomplete="username" />
        <label for="new-password">New password</label>
        <p class="hint" id="new-password-hint">
          At least 10 characters. A few unrelated words make a strong password that is easy to remember.
        </p>
        <input
          id="new-password"
          name="password"
          type="password"
          autocomplete="new-password"
          minlength="10"
          required
          aria-describedby="new-password-hint"
        />
        <button type="submit">Set password</button>
      </form>`,
    { narrow: true },
  );
}

export function linkInvalidPage(ctx: PageContext): Html {
  return layout(
    ctx,
    'This link does not work',
    html`<p>The link has expired or has already been used. Each link works once.</p>
      <p><a href="/forgot-password">Get a new link</a> or <a href="/sign-in">sign in</a>.</p>`,
    { narrow: true },
  );
}

export function forbiddenPage(ctx: PageContext): Html {
  return layout(
    ctx,
    'This form has expired',
    html`<p>For your safety the form was refused. Go back, reload the page and try again.</p>
      <p><a href="/">Go to the dashboard</a></p>`,
    {
      narrow: true,
    },
  );
}

// --- signed in ---

const gbText = (bytes: number) => `${(bytes / 1e9).toLocaleString('en-US', { maximumFractionDigits: 3 })} GB`;
const dateText = (d: Date | null) => (d ? d.toISOString().slice(0, 16).replace('T', ' ') + ' UTC' : 'never');
const keyText = (k: { prefix: string; last4: string }) => `${k.prefix}…${k.last4}`;

export interface ProductUsage {
  product: string;
  total: number;
  used: number;
  remaining: number;
  /** The account's bandwidth cap on the product, bytes per second (docs/adr/0035); undefined: none set. */
  cap?: number | undefined;
}

/** A cap in MB/s (10^6 bytes, as GB are 10^9 here). */
const rateText = (bytesPerSecond: number) =>
  `${(bytesPerSecond / 1e6).toLocaleString('en-US', { maximumFractionDigits: 2 })} MB/s`;

export interface ChartData {
  days: string[];
  products: string[];
  /** MB (10^6 bytes) per product (outer) per day (inner). */
  series: number[][];
}

export interface TopTargets {
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

/** Rows of the Overview's Top targets table (the API gives them all). */
const TOP_TARGETS = 20;

function topTargets(t: TopTargets): Html {
  const shown = t.rows.slice(0, TOP_TARGETS);
  return html`<section class="card" aria-labelledby="targets-h">
    <h2 id="targets-h">Top targets</h2>
    ${message('error', t.error)}
    <form method="get" action="/">
      <label for="targets-day">Day (UTC)</label>
      <input id="targets-day" name="day" type="date" min="${t.earliest}" max="${t.today}" value="${t.date}" />
      ${
        t.subUsers.length === 0
          ? ''
          : html`<label for="targets-sub-user">Sent by</label>
              <select id="targets-sub-user" name="subUser">
                <option value="">The whole account</option>
                ${t.subUsers.map(
                  (x) =>
                    html`<option value="${x.id}" ${x.id === t.subUser ? html` selected` : ''}>
                      Sub-user ${x.name}
                    </option>`,
                )}
              </select>`
      }
      <button type="submit" class="secondary">Show</button>
    </form>
    ${
      !t.enabled
        ? html`<p>Target statistics are off for this account; turn them on under Alerts.</p>`
        : shown.length === 0
          ? html`<p>No traffic recorded on ${t.date}.</p>`
          : html`<div class="table-wrap" tabindex="0" role="region" aria-label="Top targets per domain">
              <table>
                <caption class="visually-hidden">
                  Top targets on ${t.date}${t.subUser ? ' of one sub-user' : ''}
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Domain</th>
                    <th scope="col">Product</th>
                    <th scope="col" class="num">Bytes</th>
                    <th scope="col" class="num">Requests</th>
                  </tr>
                </thead>
                <tbody>
                  ${shown.map(
                    (r) =>
                      html`<tr>
                        <th scope="row">${r.domain}</th>
                        <td>${r.product}</td>
                        <td class="num">${r.bytes.toLocaleString('en-US')}</td>
                        <td class="num">${r.requests.toLocaleString('en-US')}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
    }
    <p class="hint">
      Per registrable domain, never a path or a query; kept 30 days. The ${TOP_TARGETS} largest are shown (all
      of them: GET /api/v1/usage/targets).
    </p>
  </section>`;
}

export function overviewPage(
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
            : html`<div class="table-wrap" tabindex="0" role="region" aria-label="Bandwidth per product">
                <table>
                  <caption class="visually-hidden">
                    Bandwidth per product
                  </caption>
                  <thead>
                    <tr>
                      <th scope="col">Product</th>
                      <th scope="col" class="num">Bought</th>
                      <th scope="col" class="num">Used</th>
                      <th scope="col" class="num">Remaining</th>
                      <th scope="col">Share used</th>
                      <th scope="col" class="num">Speed cap</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${bought.map(
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
                    )}
                  </tbody>
                </table>
              </div>`
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
          <div class="table-wrap" tabindex="0" role="region" aria-label="Usage as a table">
            <table>
              <caption class="visually-hidden">
                ${chartLabel}
              </caption>
              <thead>
                <tr>
                  <th scope="col">Day</th>
                  ${data.chart.products.map((p) => html`<th scope="col" class="num">${p}</th>`)}
                </tr>
              </thead>
              <tbody>
                ${data.chart.days.map(
                  (day, i) =>
                    html`<tr>
                      <th scope="row">${day}</th>
                      ${data.chart.series.map((s) => html`<td class="num">${s[i] ?? 0}</td>`)}
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>
        </details>
      </section>
      ${topTargets(data.targets)}`,
    { chart: true },
  );
}

/** A button that opens a dialog (JavaScript) or a confirmation page (without). */
function confirmed(
  ctx: PageContext,
  o: {
    id: string;
    pageHref: string;
    action: string;
    open: string;
    title: string;
    text: string;
    confirm: string;
    danger?: boolean;
  },
): Html {
  return html`<form method="get" action="${o.pageHref}" data-confirm="${o.id}">
      <button type="submit" class="${o.danger ? 'danger' : 'secondary'}">${o.open}</button>
    </form>
    <dialog id="${o.id}" aria-labelledby="${o.id}-h">
      <h2 id="${o.id}-h">${o.title}</h2>
      <p>${o.text}</p>
      <form method="post" action="${o.action}">
        ${csrfField(ctx)}<button type="submit" class="danger">${o.confirm}</button>
        <button type="button" class="secondary" data-close="1">Cancel</button>
      </form>
    </dialog>`;
}

export function confirmPage(
  ctx: PageContext,
  o: { title: string; text: string; action: string; confirm: string; back: string },
): Html {
  return layout(
    ctx,
    o.title,
    html`<p>${o.text}</p>
      <form method="post" action="${o.action}">
        ${csrfField(ctx)}<button type="submit" class="danger">${o.confirm}</button>
      </form>
      <p><a href="${o.back}">Cancel</a></p>`,
    { narrow: true },
  );
}

const copyButton = (id: string) =>
  html`<button type="button" class="secondary" data-copy="${id}" data-js-only hidden>Copy</button>`;

export interface GenerateForm {
  product: string;
  country: string;
  sessionType: string;
  count: string;
  /** A sub-user's id, or '' for the account's own credentials. */
  subUser?: string;
}

export interface AllowlistForm {
  product: string;
  cidr: string;
  targeting: string;
}

export function proxiesPage(
  ctx: PageContext,
  data: {
    username: string;
    password: string;
    isp: IspProxy[];
    form: GenerateForm;
    generated?: string[];
    error?: string;
    notice?: string;
    allowlist: { entries: AllowlistEntry[]; limit: number };
    allowlistForm?: AllowlistForm;
    allowlistError?: string;
    /** Sub-users whose credentials the generator can use instead of the account's. */
    subUsers?: { id: string; name: string }[];
  },
): Html {
  const f = data.form;
  const option = (value: string, label: string, selected: string) =>
    html`<option value="${value}" ${value === selected ? html` selected` : ''}>${label}</option>`;
  return layout(
    ctx,
    'Proxies',
    html`${message('success', data.notice)}
      <section class="card" aria-labelledby="cred-h">
        <h2 id="cred-h">Proxy credentials</h2>
        <p class="hint">
          Use these with any gateway; add targeting to the username or password as in generated proxies.
        </p>
        <p class="hint" id="proxy-url-forms">
          HTTP: <span class="mono">http://username:password@host:port</span>. SOCKS5 on the same port:
          <span class="mono">socks5h://username:password@host:port</span>.
        </p>
        <label for="proxy-username">Proxy username</label>
        <div class="row">
          <input
            id="proxy-username"
            class="mono"
            value="${data.username}"
            readonly
          />${copyButton('proxy-username')}
        </div>
        <label for="proxy-password">Proxy password</label>
        <div class="row">
          <input
            id="proxy-password"
            class="mono"
            type="password"
            value="${data.password}"
            readonly
            autocomplete="off"
          />
          <button
            type="button"
            class="secondary"
            data-reveal="proxy-password"
            aria-pressed="false"
            data-js-only
            hidden
          >
            Reveal</button
          >${copyButton('proxy-password')}
        </div>
        ${confirmed(ctx, {
          id: 'reset-password-dialog',
          pageHref: '/proxies/reset-password',
          action: '/proxies/reset-password',
          open: 'Reset proxy password',
          title: 'Issue a new password for the gateways?',
          text: 'A new password is issued and the current one stops working on every gateway within seconds. Proxies you generated before stop working.',
          confirm: 'Reset password',
        })}
      </section>
      <section class="card" aria-labelledby="gen-h">
        <h2 id="gen-h">Generate proxies</h2>
        ${message('error', data.error)}
        <form method="post" action="/proxies/generate">
          ${csrfField(ctx)}
          <div class="grid">
            <div>
              <label for="gen-product">Product</label>
              <select id="gen-product" name="provider">
                ${PRODUCTS.map((p) => option(p, p, f.product))}
              </select>
            </div>
            <div>
              <label for="gen-country">Country</label>
              <input
                id="gen-country"
                name="country"
                value="${f.country}"
                maxlength="2"
                autocomplete="off"
                aria-describedby="gen-country-hint"
                required
              />
              <p class="hint" id="gen-country-hint">Two letters, for example us</p>
            </div>
            <div>
              <label for="gen-session">Session type</label>
              <select id="gen-session" name="sessionType">
                ${option('rotating', 'Rotating', f.sessionType)}${option('sticky', 'Sticky', f.sessionType)}
              </select>
            </div>
            ${
              data.subUsers?.length
                ? html`<div>
                    <label for="gen-sub-user">Generate for</label>
                    <select id="gen-sub-user" name="subUser">
                      ${option('', 'Your own', f.subUser ?? '')}${data.subUsers.map((s) =>
                        option(s.id, `Sub-user ${s.name}`, f.subUser ?? ''),
                      )}
                    </select>
                  </div>`
                : ''
            }
            <div>
              <label for="gen-count">Count</label>
              <input
                id="gen-count"
                name="count"
                type="number"
                min="1"
                max="1000"
                value="${f.count}"
                required
              />
            </div>
          </div>
          <button type="submit">Generate</button>
        </form>
        ${
          data.generated
            ? html`<label for="generated">Generated proxies</label>
                <p class="hint">host:port:username:password, one per line</p>
                <textarea id="generated" rows="${Math.min(10, Math.max(2, data.generated.length))}" readonly>
${data.generated.join('\n')}</textarea>
                <div class="row">
                  ${copyButton('generated')}<button
                    type="button"
                    class="secondary"
                    data-download="generated"
                    data-filename="proxies-${f.product}.txt"
                    data-js-only
                    hidden
                  >
                    Download .txt
                  </button>
                </div>`
            : ''
        }
      </section>
      <section class="card" aria-labelledby="isp-h">
        <h2 id="isp-h">ISP proxies</h2>
        ${
          data.isp.length === 0
            ? html`<p>No static ISP proxies on this account.</p>`
            : html`<div class="table-wrap" tabindex="0" role="region" aria-label="ISP proxies">
                  <table>
                    <thead>
                      <tr>
                        <th scope="col">Proxy</th>
                        <th scope="col">Country</th>
                        <th scope="col">City</th>
                        <th scope="col">ISP</th>
                        <th scope="col">Status</th>
                        <th scope="col">Expires</th>
                      </tr>
                    </thead>
                    <tbody>
                      ${data.isp.map(
                        (p) =>
                          html`<tr>
                            <td class="mono">${p.host}:${p.port}:${p.username}:••••••</td>
                            <td>${p.country}</td>
                            <td>${p.city ?? ''}</td>
                            <td>${p.isp ?? ''}</td>
                            <td>${p.status}</td>
                            <td>${p.expiresAt ? p.expiresAt.slice(0, 10) : 'never'}</td>
                          </tr>`,
                      )}
                    </tbody>
                  </table>
                </div>
                <label for="isp-list">ISP proxies as text</label>
                <textarea id="isp-list" rows="${Math.min(8, data.isp.length + 1)}" readonly>
${data.isp.map((p) => p.proxy).join('\n')}</textarea>
                <div class="row">${copyButton('isp-list')}</div>`
        }
      </section>
      ${allowlistSection(ctx, data.allowlist, data.allowlistForm, data.allowlistError)}`,
  );
}

/** The Proxies page's IP allowlist (docs/adr/0036): entries, a remove button each, an add form. */
function allowlistSection(
  ctx: PageContext,
  list: { entries: AllowlistEntry[]; limit: number },
  form: AllowlistForm = { product: 'basic', cidr: '', targeting: '' },
  error?: string,
): Html {
  return html`<section class="card" aria-labelledby="allow-h">
    <h2 id="allow-h">IP allowlist</h2>
    <p class="hint">
      Requests from these addresses use the product's gateways without a username or password (at most
      ${String(list.limit)} entries; a range at most /24 or /48 wide). Requests that send credentials are
      judged by them.
    </p>
    ${message('error', error)}
    ${
      list.entries.length === 0
        ? html`<p>No allowlisted addresses.</p>`
        : html`<div class="table-wrap" tabindex="0" role="region" aria-label="IP allowlist">
            <table>
              <thead>
                <tr>
                  <th scope="col">Address or range</th>
                  <th scope="col">Product</th>
                  <th scope="col">Targeting</th>
                  <th scope="col"><span class="visually-hidden">Remove</span></th>
                </tr>
              </thead>
              <tbody>
                ${list.entries.map(
                  (e) =>
                    html`<tr>
                      <td class="mono">${e.cidr}</td>
                      <td>${e.product}</td>
                      <td class="mono">${e.targeting ?? 'rotating, any country'}</td>
                      <td>
                        <form method="post" action="/proxies/allowlist/${e.id}/remove">
                          ${csrfField(ctx)}
                          <button
                            type="submit"
                            class="secondary"
                            aria-label="Remove ${e.cidr} (${e.product})"
                          >
                            Remove
                          </button>
                        </form>
                      </td>
                    </tr>`,
                )}
              </tbody>
            </table>
          </div>`
    }
    <form method="post" action="/proxies/allowlist">
      ${csrfField(ctx)}
      <div class="grid">
        <div>
          <label for="allow-product">Product to allow</label>
          <select id="allow-product" name="product">
            ${PRODUCTS.map((p) => html`<option value="${p}" ${p === form.product ? html` selected` : ''}>${p}</option>`)}
          </select>
        </div>
        <div>
          <label for="allow-cidr">Address or range</label>
          <input
            id="allow-cidr"
            name="cidr"
            class="mono"
            value="${form.cidr}"
            maxlength="50"
            autocomplete="off"
            aria-describedby="allow-cidr-hint"
            required
          />
          <p class="hint" id="allow-cidr-hint">For example 203.0.113.7 or 203.0.113.0/24</p>
        </div>
        <div>
          <label for="allow-targeting">Targeting (optional)</label>
          <input
            id="allow-targeting"
            name="targeting"
            class="mono"
            value="${form.targeting}"
            maxlength="200"
            autocomplete="off"
            aria-describedby="allow-targeting-hint"
          />
          <p class="hint" id="allow-targeting-hint">
            As after the password or username, for example country-us_session-abc123
          </p>
        </div>
      </div>
      <button type="submit">Add to allowlist</button>
    </form>
  </section>`;
}

export function keysPage(
  ctx: PageContext,
  data: {
    keys: KeyRecord[];
    newKey?: { apiKey: string; label: string };
    error?: string;
    notice?: string;
    limit: number;
  },
): Html {
  const active = data.keys.filter((k) => k.revokedAt === null);
  const primary = active.find((k) => k.kind === 'primary');
  const named = active.filter((k) => k.kind === 'named');
  return layout(
    ctx,
    'API keys',
    html`${message('error', data.error)}${message('success', data.notice)}
      ${
        data.newKey
          ? html`<section class="notice" aria-labelledby="new-key-h">
              <h2 id="new-key-h">${data.newKey.label}</h2>
              <p>
                Copy it now: it is shown only once. It already works, and any key it replaced is already
                refused.
              </p>
              <label for="new-key">New API key</label>
              <div class="row">
                <input
                  id="new-key"
                  class="mono"
                  value="${data.newKey.apiKey}"
                  readonly
                  autocomplete="off"
                />${copyButton('new-key')}
              </div>
            </section>`
          : ''
      }
      <section class="card" aria-labelledby="primary-h">
        <h2 id="primary-h">Primary key</h2>
        <p>Primary key: <code>${primary ? keyText(primary) : 'none'}</code></p>
        ${primary ? html`<p class="hint">Created ${dateText(primary.createdAt)}, last used ${dateText(primary.lastUsedAt)}</p>` : ''}
        ${confirmed(ctx, {
          id: 'regenerate-dialog',
          pageHref: '/keys/regenerate',
          action: '/keys/regenerate',
          open: 'Regenerate primary key',
          title: 'Regenerate the primary key?',
          text: 'A new primary key is issued and the current one stops working at once, on every server.',
          confirm: 'Regenerate',
        })}
      </section>
      <section class="card" aria-labelledby="named-h">
        <h2 id="named-h">Named keys</h2>
        <p class="hint">Up to ${data.limit} named keys, each with its own name, revocable on its own.</p>
        <form method="post" action="/keys">
          ${csrfField(ctx)}
          <label for="key-name">Key name</label>
          <div class="row">
            <input id="key-name" name="name" maxlength="64" required autocomplete="off" /><button
              type="submit"
            >
              Create key
            </button>
          </div>
        </form>
        ${
          named.length === 0
            ? html`<p>No named keys.</p>`
            : html`<div class="table-wrap" tabindex="0" role="region" aria-label="Named API keys">
                <table>
                  <caption class="visually-hidden">
                    Named API keys
                  </caption>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Key</th>
                      <th scope="col">Created</th>
                      <th scope="col">Last used</th>
                      <th scope="col"><span class="visually-hidden">Actions</span></th>
                    </tr>
                  </thead>
                  <tbody>
                    ${named.map(
                      (k) =>
                        html`<tr>
                          <td>${k.name}</td>
                          <td class="mono">${keyText(k)}</td>
                          <td>${dateText(k.createdAt)}</td>
                          <td>${dateText(k.lastUsedAt)}</td>
                          <td>
                            ${confirmed(ctx, {
                              id: `revoke-${k.id}`,
                              pageHref: `/keys/${k.id}/revoke`,
                              action: `/keys/${k.id}/revoke`,
                              open: 'Revoke',
                              title: `Revoke the key “${k.name}”?`,
                              text: 'It stops working at once, on every server. This cannot be undone.',
                              confirm: 'Revoke',
                              danger: true,
                            })}
                          </td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>`
        }
      </section>`,
  );
}

export function alertsPage(
  ctx: PageContext,
  data: { alerts: AlertsRow; targetStats: boolean; notice?: string; error?: string },
): Html {
  const a = data.alerts;
  const box = (name: string, label: string, checked: boolean, hint: string) =>
    html`<div class="checkbox">
        <input
          type="checkbox"
          id="alert-${name}"
          name="${name}"
          value="on"
          ${checked ? html` checked` : ''}
          aria-describedby="alert-${name}-hint"
        /><label for="alert-${name}">${label}</label>
      </div>
      <p class="hint" id="alert-${name}-hint">${hint}</p>`;
  return layout(
    ctx,
    'Alerts',
    html`${message('error', data.error)}${message('success', data.notice)}
      <form method="post" action="/alerts">
        ${csrfField(ctx)}
        <fieldset>
          <legend>Email me when</legend>
          ${box('lowBandwidth', 'Low bandwidth', a.lowBandwidth, 'A product falls below the threshold below.')}
          ${box('newInvoice', 'New invoice', a.newInvoice, 'An invoice is issued (a purchase or an auto-refill).')}
          ${box('serverAlerts', 'Server alerts', a.serverAlerts, 'Gateway incidents and maintenance.')}
        </fieldset>
        <label for="alert-threshold">Low-bandwidth threshold (% remaining)</label>
        <input
          id="alert-threshold"
          name="lowBandwidthPercent"
          type="number"
          min="1"
          max="99"
          value="${a.lowBandwidthPercent}"
          required
        />
        <button type="submit">Save</button>
      </form>
      <form method="post" action="/target-stats">
        ${csrfField(ctx)}
        <fieldset>
          <legend>Privacy</legend>
          ${box(
            'targetStats',
            'Record target statistics',
            data.targetStats,
            'Bytes and requests per target domain (never a path or a query), kept 30 days, shown on the Overview. Turning this off deletes what is stored.',
          )}
        </fieldset>
        <button type="submit">Update privacy setting</button>
      </form>`,
    { narrow: true },
  );
}

export function billingPage(
  ctx: PageContext,
  data: { invoices: InvoiceLine[]; autoRefill: AutoRefillLine[]; notice?: string; error?: string },
): Html {
  const refill = new Map(data.autoRefill.map((r) => [r.product, r]));
  const change = (p: string) =>
    html`<td><a href="/billing/auto-refill/${p}" aria-label="Change auto-refill of ${p}">Change</a></td>`;
  return layout(
    ctx,
    'Billing',
    html`${message('error', data.error)}${message('success', data.notice)}
      <section class="card" aria-labelledby="inv-h">
        <h2 id="inv-h">Invoices</h2>
        ${
          data.invoices.length === 0
            ? html`<p>No invoices yet.</p>`
            : html`<div class="table-wrap" tabindex="0" role="region" aria-label="Invoices">
                <table>
                  <caption class="visually-hidden">
                    Invoices, newest first
                  </caption>
                  <thead>
                    <tr>
                      <th scope="col">Invoice</th>
                      <th scope="col">Issued</th>
                      <th scope="col">Product</th>
                      <th scope="col" class="num">Bandwidth</th>
                      <th scope="col">Source</th>
                      <th scope="col">Status</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${data.invoices.map(
                      (i) =>
                        html`<tr>
                          <td>#${i.number}</td>
                          <td>${dateText(i.issuedAt)}</td>
                          <td>${i.product}</td>
                          <td class="num">${gbText(i.bytes)}</td>
                          <td>${i.source === 'auto-refill' ? 'Auto-refill' : 'Purchase'}</td>
                          <td>${i.status}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>`
        }
      </section>
      <section class="card" aria-labelledby="refill-h">
        <h2 id="refill-h">Auto-refill</h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="Auto-refill settings">
          <table>
            <caption class="visually-hidden">
              Auto-refill settings per product
            </caption>
            <thead>
              <tr>
                <th scope="col">Product</th>
                <th scope="col">Auto-refill</th>
                <th scope="col" class="num">When below</th>
                <th scope="col" class="num">Buy</th>
                <th scope="col" class="num">At most per month</th>
                <th scope="col"><span class="visually-hidden">Actions</span></th>
              </tr>
            </thead>
            <tbody>
              ${PRODUCTS.map((p) => {
                const r = refill.get(p);
                return r
                  ? html`<tr>
                      <th scope="row">${p}</th>
                      <td>${r.enabled ? 'On' : 'Off'}</td>
                      <td class="num">${gbText(r.thresholdBytes)}</td>
                      <td class="num">${gbText(r.refillBytes)}</td>
                      <td class="num">${r.maxRefillsPerMonth}</td>
                      ${change(p)}
                    </tr>`
                  : html`<tr>
                      <th scope="row">${p}</th>
                      <td>Off</td>
                      <td class="num">–</td>
                      <td class="num">–</td>
                      <td class="num">–</td>
                      ${change(p)}
                    </tr>`;
              })}
            </tbody>
          </table>
        </div>
        <p class="hint">
          Auto-refill buys the set amount when a product's remaining bandwidth falls below its threshold, at
          most the set number of times per calendar month (UTC), with an invoice for each. The API sets the
          same with <code>PUT /api/v1/auto-refill/&lt;product&gt;</code> (docs/api.md).
        </p>
      </section>`,
  );
}

/** What the auto-refill form shows: the stored settings, or what was typed when it was refused. */
export interface AutoRefillFormValues {
  enabled: boolean;
  thresholdGb: string;
  refillGb: string;
  maxRefillsPerMonth: string;
}

export const autoRefillFormValues = (s: AutoRefillSettings): AutoRefillFormValues => ({
  enabled: s.enabled,
  thresholdGb: s.thresholdGb === null ? '' : String(s.thresholdGb),
  refillGb: s.refillGb === null ? '' : String(s.refillGb),
  maxRefillsPerMonth: String(s.maxRefillsPerMonth),
});

const AUTO_REFILL_FIELDS: Record<string, string> = {
  thresholdGb: 'When below (GB)',
  refillGb: 'Buy (GB)',
  maxRefillsPerMonth: 'At most per month',
};

/** The first problem the API's schema found, named by the form's label. */
export function autoRefillProblem(error: z.ZodError): string {
  const issue = error.issues[0];
  const field = AUTO_REFILL_FIELDS[String(issue?.path[0])] ?? 'The form';
  if (issue?.path[0] === 'thresholdGb' && issue.code === 'custom')
    return 'When below (GB): must be less than Buy (GB).';
  if (issue?.path[0] === 'maxRefillsPerMonth') return `${field}: a whole number from 1 to 100.`;
  return `${field}: a number of GB greater than 0 and at most 1,000,000.`;
}

export function autoRefillPage(
  ctx: PageContext,
  state: { settings: AutoRefillSettings; form: AutoRefillFormValues; error?: string },
): Html {
  const { settings: s, form: f } = state;
  const field = (name: keyof typeof AUTO_REFILL_FIELDS, hint: string, attrs: Html) =>
    html`<label for="refill-${name}">${AUTO_REFILL_FIELDS[name]}</label>
      <p class="hint" id="refill-${name}-hint">${hint}</p>
      <input
        id="refill-${name}"
        name="${name}"
        type="number"
        ${attrs}
        required
        value="${f[name as keyof AutoRefillFormValues]}"
        aria-describedby="refill-${name}-hint"
      />`;
  return layout(
    ctx,
    `Auto-refill of ${s.product}`,
    html`${message('error', state.error)}
      <p>
        Refills this month: ${s.refillsThisMonth}. Each refill is invoiced (${s.paymentMethod}) and announced
        by the new-invoice email when that alert is on.
      </p>
      <form method="post" action="/billing/auto-refill/${s.product}">
        ${csrfField(ctx)}
        <div class="checkbox">
          <input
            type="checkbox"
            id="refill-enabled"
            name="enabled"
            value="on"
            ${f.enabled ? html` checked` : ''}
          /><label for="refill-enabled">Auto-refill ${s.product}</label>
        </div>
        ${field('thresholdGb', 'Refill when the remaining bandwidth drops below this.', html`min="0" step="any"`)}
        ${field('refillGb', 'Bandwidth bought per refill; more than the threshold.', html`min="0" step="any"`)}
        ${field('maxRefillsPerMonth', 'Per calendar month (UTC), 1 to 100.', html`min="1" max="100" step="1"`)}
        <button type="submit">Save</button>
      </form>
      <p><a href="/billing">Back to billing</a></p>`,
    { narrow: true },
  );
}

// --- Sub-users (issue 16 item 1, docs/adr/0037) ---

/** What the create and edit forms hold, as typed (strings), so a refused form keeps it. */
export interface SubUserForm {
  name: string;
  username: string;
  password: string;
  maxConnections: string;
  bytesPerSecond: string;
  /** GB per product; '' is no limit. */
  limits: Record<string, string>;
}

export const emptySubUserForm = (): SubUserForm => ({
  name: '',
  username: '',
  password: '',
  maxConnections: '',
  bytesPerSecond: '',
  limits: Object.fromEntries(PRODUCTS.map((p) => [p, ''])),
});

/** 65536 -> "65.5 kB/s", 10000000 -> "10 MB/s" (decimal units, as the GB of balances). */
export function rate(bytesPerSecond: number): string {
  const units: [number, string][] = [
    [1e9, 'GB/s'],
    [1e6, 'MB/s'],
    [1e3, 'kB/s'],
  ];
  const [size, unit] = units.find(([s]) => bytesPerSecond >= s) ?? [1, 'B/s'];
  return `${Number((bytesPerSecond / size).toPrecision(3))} ${unit}`;
}

/** The products a sub-user has a limit on or used, as "basic: 0.3 of 1.5 GB". */
function trafficLines(s: SubUser): Html {
  const lines = PRODUCTS.filter((p) => s.products[p].limitBytes !== null || s.products[p].usedBytes > 0);
  if (lines.length === 0) return html`No limits, nothing used`;
  return html`<ul class="plain">
    ${lines.map((p) => {
      const u = s.products[p];
      return html`<li>
        ${p}: ${String(u.usedGb)}
        ${u.limitGb === null ? html`GB used, no limit` : html`of ${String(u.limitGb)} GB`}
      </li>`;
    })}
  </ul>`;
}

function subUserFields(form: SubUserForm, prefix: string, creating: boolean): Html {
  const field = (id: string, label: string, value: string, hint: string, extra: Html | string = '') =>
    html`<div>
      <label for="${prefix}-${id}">${label}</label>
      <input
        id="${prefix}-${id}"
        name="${id}"
        value="${value}"
        autocomplete="off"
        aria-describedby="${prefix}-${id}-hint"
        ${extra}
      />
      <p class="hint" id="${prefix}-${id}-hint">${hint}</p>
    </div>`;
  return html`<div class="grid">
      ${field('name', 'Name', form.name, 'Letters, digits, spaces, . _ -; unique in the account', html`maxlength="64" required`)}
      ${
        creating
          ? html`${field('username', 'Proxy username (optional)', form.username, '4 to 32 lowercase letters and digits; empty: generated', html`class="mono" maxlength="32"`)}
            ${field('password', 'Proxy password (optional)', form.password, '8 to 128 letters and digits; empty: generated', html`class="mono" maxlength="128"`)}`
          : ''
      }
      ${field('maxConnections', 'Connection cap (optional)', form.maxConnections, "Concurrent connections, 1 to 100000; empty: the plan's cap", html`type="number" min="1" max="100000"`)}
      ${field('bytesPerSecond', 'Bandwidth cap (optional)', form.bytesPerSecond, 'Bytes per second, 65536 to 10000000000; empty: no cap of its own', html`type="number" min="65536" max="10000000000"`)}
    </div>
    <fieldset>
      <legend>Traffic limit per product, GB since creation (empty: no limit)</legend>
      <div class="grid">
        ${PRODUCTS.map(
          (p) =>
            html`<div>
              <label for="${prefix}-limit-${p}">${p} limit (GB)</label>
              <input
                id="${prefix}-limit-${p}"
                name="limit_${p}"
                type="number"
                min="0"
                step="any"
                value="${form.limits[p] ?? ''}"
                autocomplete="off"
              />
            </div>`,
        )}
      </div>
    </fieldset>`;
}

export function subUsersPage(
  ctx: PageContext,
  data: { subUsers: SubUser[]; limit: number; form?: SubUserForm; error?: string; notice?: string },
): Html {
  return layout(
    ctx,
    'Sub-users',
    html`${message('success', data.notice)}
      <section class="card" aria-labelledby="subs-h">
        <h2 id="subs-h">Your sub-users</h2>
        <p class="hint">
          Each sub-user has its own proxy username and password: use them in place of yours, with the same
          targeting (the Proxies page generates proxies for a sub-user). Its traffic is billed to your
          balance; a limit caps what it may use on a product since it was created. Changes reach the gateways
          within a second. At most ${String(data.limit)} sub-users.
        </p>
        ${
          data.subUsers.length === 0
            ? html`<p>No sub-users yet.</p>`
            : html`<div class="table-wrap" tabindex="0" role="region" aria-label="Sub-users">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Proxy credentials</th>
                      <th scope="col">Status</th>
                      <th scope="col">Traffic</th>
                      <th scope="col">Connection cap</th>
                      <th scope="col">Bandwidth cap</th>
                      <th scope="col"><span class="visually-hidden">Actions</span></th>
                    </tr>
                  </thead>
                  <tbody>
                    ${data.subUsers.map(
                      (s) =>
                        html`<tr>
                          <td>${s.name}</td>
                          <td>
                            <div class="row">
                              <input
                                id="sub-cred-${s.id}"
                                class="mono"
                                type="password"
                                value="${s.username}:${s.password}"
                                aria-label="Proxy credentials of ${s.name} (username:password)"
                                readonly
                                autocomplete="off"
                              />
                              <button
                                type="button"
                                class="secondary"
                                data-reveal="sub-cred-${s.id}"
                                aria-pressed="false"
                                aria-label="Reveal the credentials of ${s.name}"
                                data-js-only
                                hidden
                              >
                                Reveal
                              </button>
                              <button
                                type="button"
                                class="secondary"
                                data-copy="sub-cred-${s.id}"
                                aria-label="Copy the credentials of ${s.name}"
                                data-js-only
                                hidden
                              >
                                Copy
                              </button>
                            </div>
                            <span class="hint mono">${s.username}</span>
                          </td>
                          <td>${s.status}</td>
                          <td>${trafficLines(s)}</td>
                          <td>${s.maxConnections === null ? "plan's cap" : String(s.maxConnections)}</td>
                          <td>${s.bytesPerSecond === null ? 'none' : rate(s.bytesPerSecond)}</td>
                          <td>
                            <div class="row">
                              <a href="/sub-users/${s.id}" aria-label="Edit ${s.name}">Edit</a>
                              <form method="post" action="/sub-users/${s.id}/status">
                                ${csrfField(ctx)}
                                <input
                                  type="hidden"
                                  name="status"
                                  value="${s.status === 'active' ? 'suspended' : 'active'}"
                                />
                                <button
                                  type="submit"
                                  class="secondary"
                                  aria-label="${s.status === 'active' ? 'Suspend' : 'Resume'} ${s.name}"
                                >
                                  ${s.status === 'active' ? 'Suspend' : 'Resume'}
                                </button>
                              </form>
                              ${confirmed(ctx, {
                                id: `sub-password-${s.id}`,
                                pageHref: `/sub-users/${s.id}/reset-password`,
                                action: `/sub-users/${s.id}/reset-password`,
                                open: 'New password',
                                title: `Issue a new password for “${s.name}”?`,
                                text: 'The current password stops working on every gateway within seconds; its open connections end.',
                                confirm: 'Issue new password',
                              })}
                              ${confirmed(ctx, {
                                id: `sub-delete-${s.id}`,
                                pageHref: `/sub-users/${s.id}/delete`,
                                action: `/sub-users/${s.id}/delete`,
                                open: 'Delete',
                                title: `Delete the sub-user “${s.name}”?`,
                                text: 'Its credentials stop working within seconds and its usage figures are deleted. This cannot be undone.',
                                confirm: 'Delete',
                                danger: true,
                              })}
                            </div>
                          </td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>`
        }
      </section>
      <section class="card" aria-labelledby="sub-new-h">
        <h2 id="sub-new-h">New sub-user</h2>
        ${message('error', data.error)}
        <form method="post" action="/sub-users">
          ${csrfField(ctx)} ${subUserFields(data.form ?? emptySubUserForm(), 'new', true)}
          <button type="submit">Create sub-user</button>
        </form>
      </section>`,
  );
}

export function subUserEditPage(
  ctx: PageContext,
  data: { subUser: SubUser; form: SubUserForm; error?: string },
): Html {
  return layout(
    ctx,
    `Edit ${data.subUser.name}`,
    html`${message('error', data.error)}
      <form method="post" action="/sub-users/${data.subUser.id}">
        ${csrfField(ctx)} ${subUserFields(data.form, 'edit', false)}
        <button type="submit">Save</button>
      </form>
      <p><a href="/sub-users">Back to sub-users</a></p>`,
  );
}
