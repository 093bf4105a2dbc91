// What every dashboard page shares (docs/adr/0061): the page frame with its navigation, messages,
// the confirmation of a destructive action (a dialog with JavaScript, a page without), the table
// wrapper and the formatting of amounts and dates. Templates escape by default (html.ts).
import { html, type Html, type HtmlValue } from './html.ts';
import { bandwidthText } from '#common/billing/remaining.ts';

export interface NavEntry {
  href: string;
  label: string;
}

export interface PageContext {
  assets: { script: string; style: string; uplotStyle: string };
  /** CSRF token for this page's forms. */
  csrf: string;
  /** The pages' entries, in the router's order; shown when signed in. */
  nav: readonly NavEntry[];
  /** Signed in: the navigation and "Sign out" are shown. */
  email?: string;
  /** Path of the current section (for aria-current). */
  current?: string;
}

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
                      ${ctx.nav.map(
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

/** An error (role alert) or a success or notice (role status); nothing without text. */
export const message = (kind: 'error' | 'success' | 'notice', text: string | undefined) =>
  text
    ? html`<div class="${kind}" ${kind === 'error' ? html`role="alert"` : html`role="status"`}>${text}</div>`
    : '';

/** Copies the field `id` (JavaScript only); `label` names it where "Copy" alone is ambiguous. */
export const copyButton = (id: string, label?: string) =>
  html`<button
    type="button"
    class="secondary"
    data-copy="${id}"
    ${label ? html`aria-label="${label}"` : ''}
    data-js-only
    hidden
  >
    Copy
  </button>`;

/** Shows or masks the password field `id` (JavaScript only). */
export const revealButton = (id: string, label?: string) =>
  html`<button
    type="button"
    class="secondary"
    data-reveal="${id}"
    aria-pressed="false"
    ${label ? html`aria-label="${label}"` : ''}
    data-js-only
    hidden
  >
    Reveal
  </button>`;

/** A destructive action and how it is confirmed; GET on `action` shows the confirmation page. */
export interface Confirmation {
  /** The dialog's element id. */
  id: string;
  action: string;
  /** The button that opens the dialog. */
  open: string;
  title: string;
  text: string;
  /** The button that confirms. */
  confirm: string;
  /** Where the confirmation page's Cancel leads. */
  back: string;
  danger?: boolean;
}

/** A button that opens a dialog (JavaScript) or the confirmation page (without). */
export function confirmButton(ctx: PageContext, c: Confirmation): Html {
  return html`<form method="get" action="${c.action}" data-confirm="${c.id}">
      <button type="submit" class="${c.danger ? 'danger' : 'secondary'}">${c.open}</button>
    </form>
    <dialog id="${c.id}" aria-labelledby="${c.id}-h">
      <h2 id="${c.id}-h">${c.title}</h2>
      <p>${c.text}</p>
      <form method="post" action="${c.action}">
        ${csrfField(ctx)}<button type="submit" class="danger">${c.confirm}</button>
        <button type="button" class="secondary" data-close="1">Cancel</button>
      </form>
    </dialog>`;
}

/** The dialog's stand-in without JavaScript. */
export function confirmPage(ctx: PageContext, c: Confirmation): Html {
  return layout(
    ctx,
    c.title,
    html`<p>${c.text}</p>
      <form method="post" action="${c.action}">
        ${csrfField(ctx)}<button type="submit" class="danger">${c.confirm}</button>
      </form>
      <p><a href="${c.back}">Cancel</a></p>`,
    { narrow: true },
  );
}

/** A POST whose CSRF token is missing or wrong. */
export function forbiddenPage(ctx: PageContext): Html {
  return layout(
    ctx,
    'This form has expired',
    html`<p>For your safety the form was refused. Go back, reload the page and try again.</p>
      <p><a href="/">Go to the dashboard</a></p>`,
    { narrow: true },
  );
}

/** A column heading: text, a number column (right-aligned), or a heading read only by screen readers. */
export type Column = string | { num: string } | { hidden: string };

const heading = (c: Column) =>
  typeof c === 'string'
    ? html`<th scope="col">${c}</th>`
    : 'num' in c
      ? html`<th scope="col" class="num">${c.num}</th>`
      : html`<th scope="col"><span class="visually-hidden">${c.hidden}</span></th>`;

/**
 * A table in a focusable, labelled region that scrolls sideways on a narrow screen (WCAG 1.4.10);
 * the caption, when given, names the table for screen readers.
 */
export function table(t: { label: string; caption?: HtmlValue; columns: Column[]; rows: HtmlValue }): Html {
  return html`<div class="table-wrap" tabindex="0" role="region" aria-label="${t.label}">
    <table>
      ${
        t.caption === undefined
          ? ''
          : html`<caption class="visually-hidden">
              ${t.caption}
            </caption>`
      }
      <thead>
        <tr>
          ${t.columns.map(heading)}
        </tr>
      </thead>
      <tbody>
        ${t.rows}
      </tbody>
    </table>
  </div>`;
}

/**
 * Decimal units throughout: GB = 10^9 bytes (docs/design.md "Units"), rounded by the one rule the
 * API and the emails use (docs/api.md, "Remaining bandwidth"): never "0 GB" while bytes remain.
 */
export const gbText = (bytes: number) => bandwidthText(bytes);

export const dateText = (d: Date | null) =>
  d ? d.toISOString().slice(0, 16).replace('T', ' ') + ' UTC' : 'never';

/** 65536 -> "65.5 kB/s", 10000000 -> "10 MB/s" (decimal units, as the GB of balances). */
export function rateText(bytesPerSecond: number): string {
  const units: [number, string][] = [
    [1e9, 'GB/s'],
    [1e6, 'MB/s'],
    [1e3, 'kB/s'],
  ];
  const [size, unit] = units.find(([s]) => bytesPerSecond >= s) ?? [1, 'B/s'];
  return `${Number((bytesPerSecond / size).toPrecision(3))} ${unit}`;
}

/**
 * The "Sent by" picker of a page that shows the whole account or one sub-user (Top targets, Usage);
 * nothing when the account has no sub-users.
 */
export function sentBySelect(
  id: string,
  subUsers: readonly { id: string; name: string }[],
  picked?: string,
): Html | '' {
  if (subUsers.length === 0) return '';
  return html`<label for="${id}">Sent by</label>
    <select id="${id}" name="subUser">
      <option value="">The whole account</option>
      ${subUsers.map(
        (x) =>
          html`<option value="${x.id}" ${x.id === picked ? html` selected` : ''}>Sub-user ${x.name}</option>`,
      )}
    </select>`;
}
