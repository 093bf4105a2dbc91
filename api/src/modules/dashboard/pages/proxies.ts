// Proxies: the account's proxy credentials (Reveal, Copy, Reset after a confirmation), the proxy
// generator, the ISP proxies, and the IP allowlist (docs/adr/0036; its section, form and routes in
// ../proxies-allowlist.ts). The generator and the allowlist take the API's own schemas, service
// and repo, so the page does what the JSON API does. The generator gives the colon form or URLs;
// https:// only for plans whose gateways serve TLS (docs/adr/0083).
import { readProxyCredentials, resetProxyPassword } from '#common/accounts/accounts.ts';
import { PRODUCTS, type Product } from '#common/products.ts';
import { generateRequestSchema, type IspProxy } from '#api/modules/proxies/schemas.ts';
import { generateProxySet, ispProxies, tlsPlans } from '#api/modules/proxies/service.ts';
import { subUserNames } from '#api/modules/sub-users/repo.ts';
import { attempt, doneNotice, formProblem, formValues } from '../forms.ts';
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
import {
  ALLOWLIST_NOTICES,
  allowlistRoutes,
  allowlistSection,
  readAllowlist,
  type Allowlist,
  type AllowlistState,
} from '../proxies-allowlist.ts';

const NOTICES: ReadonlyMap<string, string> = new Map([
  ['password', 'A new proxy password is in place.'],
  ...ALLOWLIST_NOTICES,
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

interface ProxiesState extends AllowlistState {
  form?: GenerateForm;
  generated?: Formatted;
  /** Plans whose gateways serve TLS: the https:// format is offered for them. */
  tlsPlans?: Product[];
  /** Where each plan's exits are (GET /api/v1/locations): the Country field suggests only these. */
  served?: Locations[];
  error?: string;
  notice?: string | undefined;
}

export const proxiesPage: PageModule = (deps) => {
  const { pool, credentialsKey } = deps;
  const render = async ({ person, ctx, send }: SignedInVisit, state: ProxiesState, status = 200) => {
    const creds = await readProxyCredentials(pool, person.accountId, credentialsKey);
    send(
      proxiesView(ctx, {
        username: creds.username,
        password: creds.password,
        isp: await ispProxies(deps.proxies, person.accountId),
        allowlist: await readAllowlist(pool, person.accountId, deps.allowlist.limit),
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

      ...allowlistRoutes(pool, deps.allowlist, render),

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
    allowlist: Allowlist;
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
