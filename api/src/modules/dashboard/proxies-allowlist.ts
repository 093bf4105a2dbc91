// The Proxies page's IP allowlist (docs/dashboard.md "Pages", docs/adr/0036): the entries with a
// Remove button each, and an add form judged by the API's own schema; the API's repo adds and
// removes (audited with the signed-in person). A part of pages/proxies.ts, kept beside it as
// billing-card.ts is beside pages/billing.ts.
import type { Pool } from '#common/db/pool.ts';
import { PRODUCTS } from '#common/products.ts';
import { countOf } from '#common/words.ts';
import { addAllowlistEntry, listAllowlist, removeAllowlistEntry } from '#api/modules/ip-allowlist/repo.ts';
import { allowlistCreate, type AllowlistEntry } from '#api/modules/ip-allowlist/schemas.ts';
import { dashboardActor } from '#api/http/actor.ts';
import { attempt, formProblem, formValues, pathId } from './forms.ts';
import { html, type Html } from './html.ts';
import { csrfField, message, table, type PageContext } from './layout.ts';
import { post, type DashboardDeps, type PageRoute, type SignedInVisit } from './page.ts';

export const ALLOWLIST_NOTICES: Array<[string, string]> = [
  ['allowlist-added', 'The address is allowlisted; gateways accept it within a second.'],
  ['allowlist-removed', 'The entry is removed; connections it admitted are ended.'],
];

const ALLOWLIST_FIELDS = ['product', 'cidr', 'targeting'] as const;
export type AllowlistForm = Record<(typeof ALLOWLIST_FIELDS)[number], string>;
const ALLOWLIST_LABELS = { product: 'Product', cidr: 'Address or range', targeting: 'Targeting' };

/** The account's entries and how many it may have. */
export interface Allowlist {
  entries: AllowlistEntry[];
  limit: number;
}

/** What the section shows besides the entries: a refused add form as typed, or why an action failed. */
export interface AllowlistState {
  allowlistForm?: AllowlistForm;
  allowlistError?: string;
}

export const readAllowlist = async (pool: Pool, accountId: string, limit: number): Promise<Allowlist> => ({
  entries: (await listAllowlist(pool, accountId)) ?? [],
  limit,
});

/** Add and Remove; a refusal comes back on the page (`refuse`) with the form as typed. */
export function allowlistRoutes(
  pool: Pool,
  rules: DashboardDeps['allowlist'],
  refuse: (visit: SignedInVisit, state: AllowlistState, status: number) => Promise<void>,
): PageRoute[] {
  const allowlistSchema = allowlistCreate(rules.allowPrivate);
  return [
    post('/proxies/allowlist', async (visit) => {
      const form = formValues(visit.req.body, ALLOWLIST_FIELDS);
      const parsed = allowlistSchema.safeParse({
        product: form.product,
        cidr: form.cidr,
        ...(form.targeting ? { targeting: form.targeting } : {}),
      });
      if (!parsed.success) {
        const allowlistError = formProblem(parsed.error, ALLOWLIST_LABELS);
        return refuse(visit, { allowlistForm: form, allowlistError }, 422);
      }
      const added = await attempt(() =>
        addAllowlistEntry(
          pool,
          visit.person.accountId,
          parsed.data,
          rules.limit,
          dashboardActor(visit.req, visit.person.email),
        ),
      );
      if (!added.ok)
        return refuse(visit, { allowlistForm: form, allowlistError: added.refusal.message }, 409);
      visit.res.redirect(303, '/proxies?done=allowlist-added');
    }),

    post('/proxies/allowlist/:entryId/remove', async (visit) => {
      const entryId = pathId(visit.req, 'entryId');
      const removed =
        entryId &&
        (await removeAllowlistEntry(
          pool,
          visit.person.accountId,
          entryId,
          dashboardActor(visit.req, visit.person.email),
        ));
      if (!removed) {
        const allowlistError = 'That entry does not exist or is already removed.';
        return refuse(visit, { allowlistError }, 404);
      }
      visit.res.redirect(303, '/proxies?done=allowlist-removed');
    }),
  ];
}

/** The IP allowlist (docs/adr/0036): entries, a remove button each, an add form. */
export function allowlistSection(
  ctx: PageContext,
  list: Allowlist,
  form: AllowlistForm = { product: 'basic', cidr: '', targeting: '' },
  error?: string,
): Html {
  return html`<section class="card" aria-labelledby="allow-h">
    <h2 id="allow-h">IP allowlist</h2>
    <p class="hint">
      Requests from these addresses use the product's gateways without a username or password (at most
      ${countOf(list.limit, 'entry', 'entries')}; a range at most /24 or /48 wide). Requests that send
      credentials are judged by them.
    </p>
    ${message('error', error)}
    ${
      list.entries.length === 0
        ? html`<p>No allowlisted addresses.</p>`
        : table({
            label: 'IP allowlist',
            columns: ['Address or range', 'Product', 'Targeting', { hidden: 'Remove' }],
            rows: list.entries.map(
              (e) =>
                html`<tr>
                  <td class="mono">${e.cidr}</td>
                  <td>${e.product}</td>
                  <td class="mono">${e.targeting ?? 'rotating, any country'}</td>
                  <td>
                    <form method="post" action="/proxies/allowlist/${e.id}/remove">
                      ${csrfField(ctx)}
                      <button type="submit" class="secondary" aria-label="Remove ${e.cidr} (${e.product})">
                        Remove
                      </button>
                    </form>
                  </td>
                </tr>`,
            ),
          })
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
