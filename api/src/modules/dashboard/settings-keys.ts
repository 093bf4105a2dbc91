// The Settings page's API keys (docs/dashboard.md "Settings"): the primary key (Regenerate after a
// confirmation) and the named keys (Create, Revoke after a confirmation), with the admin API's
// operations and rules. A new key is shown once, and only when every API process already refuses
// the key it replaced (docs/adr/0050); why it cannot be shown again is said beside it
// (docs/adr/0100). A part of pages/settings.ts, kept beside it as billing-subscriptions.ts is.
import {
  createNamedKey,
  listKeys,
  MAX_NAMED_KEYS,
  regeneratePrimaryKey,
  revokeKey,
  type KeyRecord,
} from '#common/accounts/keys.ts';
import type { Pool } from '#common/db/pool.ts';
import { activeKeyKind } from '#api/modules/account/repo.ts';
import { createKeySchema } from '#api/modules/account/schemas.ts';
import type { WaitForApiCaches } from '#api/modules/sync/wait.ts';
import { dashboardActor } from '#api/http/actor.ts';
import { attempt, formProblem, formValues, pathId } from './forms.ts';
import { html, type Html } from './html.ts';
import {
  confirmButton,
  confirmPage,
  copyButton,
  csrfField,
  dateText,
  table,
  type Confirmation,
  type PageContext,
} from './layout.ts';
import { get, post, type PageRoute, type SignedInVisit } from './page.ts';

export const SETTINGS = '/settings';

const REGENERATE: Confirmation = {
  id: 'regenerate-dialog',
  action: '/settings/regenerate-key',
  open: 'Regenerate primary key',
  title: 'Regenerate the primary key?',
  text:
    'A new primary key is issued and shown once; the current one stops working at once, on every server. ' +
    'Every integration that uses it must be given the new key.',
  confirm: 'Regenerate',
  back: SETTINGS,
};

const revoke = (k: { id: string; name: string }): Confirmation => ({
  id: `revoke-${k.id}`,
  action: `/settings/keys/${k.id}/revoke`,
  open: 'Revoke',
  title: `Revoke the key “${k.name}”?`,
  text: 'It stops working at once, on every server. This cannot be undone.',
  confirm: 'Revoke',
  back: SETTINGS,
  danger: true,
});

const NO_SUCH_KEY = 'That key does not exist or is already revoked.';

export interface KeysState {
  newKey?: { apiKey: string; label: string };
  error?: string;
  notice?: string | undefined;
}

export const readKeys = listKeys;

/** The key routes; `render` draws the whole Settings page with a message or the new key. */
export function keyRoutes(
  pool: Pool,
  waitForApiCaches: WaitForApiCaches,
  render: (visit: SignedInVisit, state: KeysState, status?: number) => Promise<void>,
): PageRoute[] {
  /** The named key of the path, if it is active: the admin API's rule (the primary is regenerated, never revoked). */
  const pathKey = async ({ req, person }: SignedInVisit): Promise<string | undefined> => {
    const keyId = pathId(req, 'keyId');
    return keyId && (await activeKeyKind(pool, person.accountId, keyId)) === 'named' ? keyId : undefined;
  };
  return [
    get(REGENERATE.action, ({ ctx, send }) => send(confirmPage(ctx, REGENERATE))),

    post(REGENERATE.action, async (visit) => {
      const key = await regeneratePrimaryKey(
        pool,
        visit.person.accountId,
        undefined,
        dashboardActor(visit.req, visit.person.email),
      );
      // As the admin API: shown only once every API process refuses the old key.
      await waitForApiCaches();
      await render(visit, { newKey: { apiKey: key.apiKey, label: 'Your new primary key' } });
    }),

    post('/settings/keys', async (visit) => {
      // The admin API's rules for names, from its own schema.
      const parsed = createKeySchema.safeParse(formValues(visit.req.body, ['name']));
      if (!parsed.success)
        return render(visit, { error: formProblem(parsed.error, { name: 'Key name' }) }, 422);
      const { name } = parsed.data;
      const created = await attempt(
        () =>
          createNamedKey(
            pool,
            visit.person.accountId,
            name,
            undefined,
            dashboardActor(visit.req, visit.person.email),
          ),
        (err) => err.code === 'NAMED_KEY_LIMIT' || err.code === 'KEY_NAME_TAKEN',
      );
      if (!created.ok) return render(visit, { error: created.refusal.message }, 409);
      await render(visit, { newKey: { apiKey: created.value.apiKey, label: `Your new key “${name}”` } }, 201);
    }),

    get('/settings/keys/:keyId/revoke', async (visit) => {
      const keyId = await pathKey(visit);
      if (!keyId) return render(visit, { error: NO_SUCH_KEY }, 404);
      const key = (await listKeys(pool, visit.person.accountId)).find((k) => k.id === keyId);
      visit.send(confirmPage(visit.ctx, revoke({ id: keyId, name: key?.name ?? '' })));
    }),

    post('/settings/keys/:keyId/revoke', async (visit) => {
      const keyId = await pathKey(visit);
      const actor = dashboardActor(visit.req, visit.person.email);
      if (!keyId || !(await revokeKey(pool, visit.person.accountId, keyId, actor)))
        return render(visit, { error: NO_SUCH_KEY }, 404);
      await waitForApiCaches();
      visit.res.redirect(303, '/settings?done=revoked');
    }),
  ];
}

const keyText = (k: { prefix: string; last4: string }) => `${k.prefix}…${k.last4}`;

function newKeyNotice(newKey: NonNullable<KeysState['newKey']>): Html {
  return html`<section class="notice" aria-labelledby="new-key-h">
    <h3 id="new-key-h">${newKey.label}</h3>
    <p>Copy it now: it is shown only once. It already works, and any key it replaced is already refused.</p>
    <label for="new-key">New API key</label>
    <div class="row">
      <input
        id="new-key"
        class="mono"
        value="${newKey.apiKey}"
        readonly
        autocomplete="off"
      />${copyButton('new-key')}
    </div>
  </section>`;
}

/** The API keys section: the new key once, the primary key, the named keys. */
export function keysSection(ctx: PageContext, data: KeysState & { keys: KeyRecord[] }): Html {
  const active = data.keys.filter((k) => k.revokedAt === null);
  const primary = active.find((k) => k.kind === 'primary');
  const named = active.filter((k) => k.kind === 'named');
  return html`<section class="card" id="api-keys" aria-labelledby="keys-h">
    <h2 id="keys-h">API keys</h2>
    ${data.newKey ? newKeyNotice(data.newKey) : ''}
    <p class="hint" id="why-once">
      A key is shown only when it is created or regenerated. We keep only a one-way fingerprint of it
      (SHA-256), which checks a key sent to the API but cannot be turned back into the key, so nobody,
      including us, can show it again and a copy of our database gives no one your keys. If you lose one,
      regenerate it or create a new named key. Keep keys on your servers: never in a web page, browser
      extension or mobile app.
    </p>
    <h3>Primary key</h3>
    <p>Primary key: <code>${primary ? keyText(primary) : 'none'}</code></p>
    ${
      primary
        ? html`<p class="hint">
            Created ${dateText(primary.createdAt)}, last used ${dateText(primary.lastUsedAt)}
          </p>`
        : ''
    }
    ${confirmButton(ctx, REGENERATE)}
    <h3>Named keys</h3>
    <p class="hint">Up to ${MAX_NAMED_KEYS} named keys, each with its own name, revocable on its own.</p>
    <form method="post" action="/settings/keys">
      ${csrfField(ctx)}
      <label for="key-name">Key name</label>
      <div class="row">
        <input id="key-name" name="name" maxlength="64" required autocomplete="off" /><button type="submit">
          Create key
        </button>
      </div>
    </form>
    ${
      named.length === 0
        ? html`<p>No named keys.</p>`
        : table({
            label: 'Named API keys',
            caption: 'Named API keys',
            columns: ['Name', 'Key', 'Created', 'Last used', { hidden: 'Actions' }],
            rows: named.map(
              (k) =>
                html`<tr>
                  <td>${k.name}</td>
                  <td class="mono">${keyText(k)}</td>
                  <td>${dateText(k.createdAt)}</td>
                  <td>${dateText(k.lastUsedAt)}</td>
                  <td>${confirmButton(ctx, revoke(k))}</td>
                </tr>`,
            ),
          })
    }
  </section>`;
}
