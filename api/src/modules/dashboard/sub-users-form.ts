// The Sub-users page's form (docs/adr/0037), for creating and for editing a sub-user: what it holds
// (as typed, so a refused form comes back with it), how a post is read into it and turned into
// the fields the API's schemas judge (POST and PATCH /api/v1/sub-users), and how it is drawn,
// with the edit page around it. A part of pages/sub-users.ts, kept beside it as billing-card.ts
// is beside pages/billing.ts.
import { PRODUCTS } from '#common/products.ts';
import type { SubUser } from '#api/modules/sub-users/schemas.ts';
import { formValues } from './forms.ts';
import { html, type Html } from './html.ts';
import { csrfField, layout, message, type PageContext } from './layout.ts';

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

const FIELDS = ['name', 'username', 'password', 'maxConnections', 'bytesPerSecond'] as const;
const LIMIT_FIELDS = PRODUCTS.map((p) => `limit_${p}`);
export const SUB_USER_LABELS = {
  name: 'Name',
  username: 'Proxy username',
  password: 'Proxy password',
  maxConnections: 'Connection cap',
  bytesPerSecond: 'Bandwidth cap',
  ...Object.fromEntries(PRODUCTS.map((p) => [`trafficLimits.${p}`, `${p} limit`])),
};

export function readForm(body: unknown): SubUserForm {
  const limits = formValues(body, LIMIT_FIELDS);
  return {
    ...formValues(body, FIELDS),
    limits: Object.fromEntries(PRODUCTS.map((p) => [p, limits[`limit_${p}`] ?? ''])),
  };
}

/** An empty field: left out when creating, removed (null) when editing. */
const numberOr = (v: string, empty: null | undefined) => (v === '' ? empty : Number(v));

export const formOf = (s: SubUser): SubUserForm => ({
  name: s.name,
  username: s.username,
  password: '',
  maxConnections: s.maxConnections === null ? '' : String(s.maxConnections),
  bytesPerSecond: s.bytesPerSecond === null ? '' : String(s.bytesPerSecond),
  limits: Object.fromEntries(
    PRODUCTS.map((p) => [p, s.products[p].limitGb === null ? '' : String(s.products[p].limitGb)]),
  ),
});

export const emptyForm = (): SubUserForm => ({
  name: '',
  username: '',
  password: '',
  maxConnections: '',
  bytesPerSecond: '',
  limits: Object.fromEntries(PRODUCTS.map((p) => [p, ''])),
});

/** The create form as POST /api/v1/sub-users takes it: empty fields left out. */
export function createFields(form: SubUserForm) {
  const limits = Object.fromEntries(
    PRODUCTS.filter((p) => form.limits[p] !== '').map((p) => [p, Number(form.limits[p])]),
  );
  return {
    name: form.name,
    ...(form.username ? { username: form.username } : {}),
    ...(form.password ? { password: form.password } : {}),
    maxConnections: numberOr(form.maxConnections, undefined),
    bytesPerSecond: numberOr(form.bytesPerSecond, undefined),
    ...(Object.keys(limits).length ? { trafficLimits: limits } : {}),
  };
}

/** The edit form as PATCH /api/v1/sub-users/:id takes it: an empty cap or limit removed (null). */
export const updateFields = (form: SubUserForm) => ({
  name: form.name,
  maxConnections: numberOr(form.maxConnections, null),
  bytesPerSecond: numberOr(form.bytesPerSecond, null),
  trafficLimits: Object.fromEntries(PRODUCTS.map((p) => [p, numberOr(form.limits[p] ?? '', null)])),
});

export function subUserFields(form: SubUserForm, prefix: string, creating: boolean): Html {
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

export function subUserEditView(
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
