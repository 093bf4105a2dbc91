// Proxies: the account's proxy credentials (Reveal, Copy, Reset after a confirmation), the proxy
// generator, the ISP proxies, and the IP allowlist (docs/adr/0036). The generator and the allowlist
// take the API's own schemas, service and repo, so the page does what the JSON API does. The
// generator gives the colon form or URLs; https:// only for plans whose gateways serve TLS
// (docs/adr/0083).
import { readProxyCredentials, resetProxyPassword } from '#common/accounts/accounts.ts';
import { PRODUCTS, type Product } from '#common/products.ts';
import { addAllowlistEntry, listAllowlist, removeAllowlistEntry } from '#api/modules/ip-allowlist/repo.ts';
import { allowlistCreate, type AllowlistEntry } from '#api/modules/ip-allowlist/schemas.ts';
import { generateRequestSchema, type IspProxy } from '#api/modules/proxies/schemas.ts';
import { generateProxySet, ispProxies, tlsPlans } from '#api/modules/proxies/service.ts';
import { subUserNames } from '#api/modules/sub-users/repo.ts';
import { attempt, doneNotice, formProblem, formValues, pathId } from '../forms.ts';
import { dashboardActor } from '#api/http/actor.ts';
import { html, type Html } from '../html.ts';
import {
  confirmButton,
  confirmPage,
  copyButton,
  csrfField,
  revealButton,
  layout,
  message,
  table,
  type Confirmation,
  type PageContext,
} from '../layout.ts';
import { get, post, type PageModule, type SignedInVisit } from '../page.ts';
import { formatFields, formatPicker, generatedList } from '../proxy-list-picker.ts';
import { locationsOf, type Locations } from '#api/modules/locations/service.ts';
import type { Formatted } from '#api/modules/proxies/list-format.ts';
import { countOf } from '#common/words.ts';

const NOTICES: ReadonlyMap<string, string> = new Map([
  ['password', 'A new proxy password is in place.'],
  ['allowlist-added', 'The address is allowlisted; gateways accept it within a second.'],
  ['allowlist-removed', 'The entry is removed; connections it admitted are ended.'],
]);

const RESET: Confirmation = {
  id: 'reset-password-dialog',
  action: '/proxies/reset-password',
  open: 'Reset proxy password',
  title: 'Issue a new password for the gateways?',
  text: 'A new password is issued and the current one stops working on every gateway within seconds. Proxies you generated before stop working.',
  confirm: 'Reset password',
  back: '/proxies',
};

const GENERATE_FIELDS = [
  'provider',
  'country',
  'sessionType',
  'count',
  'subUser',
  'format',
  'template',
] as const;
type GenerateForm = Record<(typeof GENERATE_FIELDS)[number], string>;
const GENERATE_LABELS = {
  provider: 'Product',
  country: 'Country',
  sessionType: 'Session type',
  count: 'Count',
  subUser: 'Generate for',
  format: 'Format',
  scheme: 'Format',
  template: 'Template',
};

const ALLOWLIST_FIELDS = ['product', 'cidr', 'targeting'] as const;
type AllowlistForm = Record<(typeof ALLOWLIST_FIELDS)[number], string>;
const ALLOWLIST_LABELS = { product: 'Product', cidr: 'Address or range', targeting: 'Targeting' };

interface ProxiesState {
  form?: GenerateForm;
  generated?: Formatted;
  /** Plans whose gateways serve TLS: the https:// format is offered for them. */
  tlsPlans?: Product[];
  /** Where each plan's exits are (GET /api/v1/locations): the Country field suggests only these. */
  served?: Locations[];
  error?: string;
  notice?: string | undefined;
  allowlistForm?: AllowlistForm;
  allowlistError?: string;
}

export const proxiesPage: PageModule = (deps) => {
  const { pool, credentialsKey } = deps;
  const allowlistSchema = allowlistCreate(deps.allowlist.allowPrivate);
  const render = async ({ person, ctx, send }: SignedInVisit, state: ProxiesState, status = 200) => {
    const creds = await readProxyCredentials(pool, person.accountId, credentialsKey);
    send(
      proxiesView(ctx, {
        username: creds.username,
        password: creds.password,
        isp: await ispProxies(deps.proxies, person.accountId),
        allowlist: {
          entries: (await listAllowlist(pool, person.accountId)) ?? [],
          limit: deps.allowlist.limit,
        },
        subUsers: await subUserNames(pool, person.accountId),
        tlsPlans: await tlsPlans(deps.proxies),
        served: await Promise.all(PRODUCTS.map((p) => locationsOf(pool, p))),
        ...state,
      }),
      status,
    );
  };

  return {
    nav: [{ href: '/proxies', label: 'Proxies' }],
    routes: [
      get('/proxies', (visit) => render(visit, { notice: doneNotice(visit.req, NOTICES) })),

      post('/proxies/generate', async (visit) => {
        const form = formValues(visit.req.body, GENERATE_FIELDS);
        // The form's fields, typed as the JSON API takes them, through the API's own schema and service.
        const parsed = generateRequestSchema.safeParse({
          provider: form.provider,
          country: form.country,
          sessionType: form.sessionType,
          count: form.count === '' ? undefined : Number(form.count),
          ...(form.subUser ? { subUser: form.subUser } : {}),
          ...formatFields(form.format, form.template),
        });
        if (!parsed.success)
          return render(visit, { form, error: formProblem(parsed.error, GENERATE_LABELS) }, 422);
        const generated = await attempt(
          () => generateProxySet(deps.proxies, visit.person.accountId, parsed.data),
          (err) =>
            [
              'NO_BANDWIDTH',
              'TARGET_NOT_SERVED',
              'SUB_USER_NOT_FOUND',
              'TLS_NOT_SERVED',
              'CLEAR_CREDENTIALS_REFUSED',
            ].includes(err.code),
        );
        if (!generated.ok)
          return render(visit, { form, error: generated.refusal.message }, generated.refusal.status);
        const { format = 'colon', lines, entries } = generated.value;
        await render(visit, {
          form,
          generated: { format, ...(lines ? { lines } : {}), ...(entries ? { entries } : {}) },
        });
      }),

      post('/proxies/allowlist', async (visit) => {
        const form = formValues(visit.req.body, ALLOWLIST_FIELDS);
        const parsed = allowlistSchema.safeParse({
          product: form.product,
          cidr: form.cidr,
          ...(form.targeting ? { targeting: form.targeting } : {}),
        });
        if (!parsed.success) {
          const allowlistError = formProblem(parsed.error, ALLOWLIST_LABELS);
          return render(visit, { allowlistForm: form, allowlistError }, 422);
        }
        const added = await attempt(() =>
          addAllowlistEntry(
            pool,
            visit.person.accountId,
            parsed.data,
            deps.allowlist.limit,
            dashboardActor(visit.req, visit.person.email),
          ),
        );
        if (!added.ok)
          return render(visit, { allowlistForm: form, allowlistError: added.refusal.message }, 409);
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
          return render(visit, { allowlistError }, 404);
        }
        visit.res.redirect(303, '/proxies?done=allowlist-removed');
      }),

      get(RESET.action, ({ ctx, send }) => send(confirmPage(ctx, RESET))),

      post(RESET.action, async ({ person, req, res }) => {
        await resetProxyPassword(pool, person.accountId, credentialsKey, dashboardActor(req, person.email));
        await deps.waitForApiCaches();
        res.redirect(303, '/proxies?done=password');
      }),
    ],
  };
};

/** "Served: basic: de, us; advanced: every country": what GET /api/v1/locations says, per plan that says. */
function servedText(served: Locations[]): string {
  const said = served.filter((l) => l.known);
  if (said.length === 0) return '';
  const places = (l: Locations) =>
    l.everyCountry ? 'every country' : l.countries.map((c) => c.country).join(', ') || 'none';
  return `Served: ${said.map((l) => `${l.product}: ${places(l)}`).join('; ')}.`;
}

function proxiesView(
  ctx: PageContext,
  data: ProxiesState & {
    username: string;
    password: string;
    isp: IspProxy[];
    allowlist: { entries: AllowlistEntry[]; limit: number };
    /** Sub-users whose credentials the generator can use instead of the account's. */
    subUsers: { id: string; name: string }[];
  },
): Html {
  const f = data.form ?? {
    provider: 'basic',
    country: 'us',
    sessionType: 'rotating',
    count: '1',
    subUser: '',
    format: 'colon',
    template: '',
  };
  const tls = data.tlsPlans ?? [];
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
          <span class="mono">socks5h://username:password@host:port</span>.${
            tls.length
              ? html` HTTPS, with TLS to the gateway so credentials never cross the network in clear, on the
                  same port for ${tls.join(', ')}:
                  <span class="mono">https://username:password@host:port</span>.`
              : ''
          }
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
          ${revealButton('proxy-password')}${copyButton('proxy-password')}
        </div>
        ${confirmButton(ctx, RESET)}
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
                ${PRODUCTS.map((p) => option(p, p, f.provider))}
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
                list="gen-countries"
                required
              />
              <p class="hint" id="gen-country-hint">
                Two letters, for example us. ${servedText(data.served ?? [])}
              </p>
              <datalist id="gen-countries">
                ${[...new Set((data.served ?? []).flatMap((l) => l.countries.map((c) => c.country)))]
                  .sort()
                  .map((c) => html`<option value="${c}"></option>`)}
              </datalist>
            </div>
            <div>
              <label for="gen-session">Session type</label>
              <select id="gen-session" name="sessionType">
                ${option('rotating', 'Rotating', f.sessionType)}${option('sticky', 'Sticky', f.sessionType)}
              </select>
            </div>
            ${
              data.subUsers.length
                ? html`<div>
                    <label for="gen-sub-user">Generate for</label>
                    <select id="gen-sub-user" name="subUser">
                      ${option('', 'Your own', f.subUser)}${data.subUsers.map((s) =>
                        option(s.id, `Sub-user ${s.name}`, f.subUser),
                      )}
                    </select>
                  </div>`
                : ''
            }
            ${formatPicker(f.format, f.template, tls)}
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
        ${data.generated ? generatedList(f.format, f.provider, data.generated) : ''}
      </section>
      <section class="card" aria-labelledby="isp-h">
        <h2 id="isp-h">ISP proxies</h2>
        ${
          data.isp.length === 0
            ? html`<p>No static ISP proxies on this account.</p>`
            : html`${table({
                  label: 'ISP proxies',
                  columns: ['Proxy', 'Country', 'City', 'ISP', 'Status', 'Expires'],
                  rows: data.isp.map(
                    (p) =>
                      html`<tr>
                        <td class="mono">${p.host}:${p.port}:${p.username}:••••••</td>
                        <td>${p.country}</td>
                        <td>${p.city ?? ''}</td>
                        <td>${p.isp ?? ''}</td>
                        <td>${p.status}</td>
                        <td>${p.expiresAt ? p.expiresAt.slice(0, 10) : 'never'}</td>
                      </tr>`,
                  ),
                })}
                <label for="isp-list">ISP proxies as text</label>
                <textarea id="isp-list" rows="${Math.min(8, data.isp.length + 1)}" readonly>
${data.isp.map((p) => p.proxy).join('\n')}</textarea>
                <div class="row">${copyButton('isp-list')}</div>`
        }
      </section>
      ${allowlistSection(ctx, data.allowlist, data.allowlistForm, data.allowlistError)}`,
  );
}

/** The IP allowlist (docs/adr/0036): entries, a remove button each, an add form. */
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
