// API keys: the primary key (Regenerate after a confirmation) and the named keys (Create, Revoke
// after a confirmation), with the admin API's operations and rules. A new key is shown once, and
// only when every API process already refuses the key it replaced (docs/adr/0050).
import {
  createNamedKey,
  listKeys,
  MAX_NAMED_KEYS,
  regeneratePrimaryKey,
  revokeKey,
  type KeyRecord,
} from '#common/accounts/keys.ts';
import { activeKeyKind } from '../../account/repo.ts';
import { createKeySchema } from '../../account/schemas.ts';
import { attempt, formProblem, formValues, pathId } from '../forms.ts';
import { dashboardActor } from '../../../http/actor.ts';
import { html, type Html } from '../html.ts';
import {
  confirmButton,
  confirmPage,
  copyButton,
  csrfField,
  dateText,
  layout,
  message,
  table,
  type Confirmation,
  type PageContext,
} from '../layout.ts';
import { get, post, type PageModule, type SignedInVisit } from '../page.ts';

const REGENERATE: Confirmation = {
  id: 'regenerate-dialog',
  action: '/keys/regenerate',
  open: 'Regenerate primary key',
  title: 'Regenerate the primary key?',
  text: 'A new primary key is issued and the current one stops working at once, on every server.',
  confirm: 'Regenerate',
  back: '/keys',
};

const revoke = (k: { id: string; name: string }): Confirmation => ({
  id: `revoke-${k.id}`,
  action: `/keys/${k.id}/revoke`,
  open: 'Revoke',
  title: `Revoke the key “${k.name}”?`,
  text: 'It stops working at once, on every server. This cannot be undone.',
  confirm: 'Revoke',
  back: '/keys',
  danger: true,
});

const NO_SUCH_KEY = 'That key does not exist or is already revoked.';

interface KeysState {
  newKey?: { apiKey: string; label: string };
  error?: string;
  notice?: string | undefined;
}

export const keysPage: PageModule = ({ pool, waitForApiCaches }) => {
  const render = async ({ person, ctx, send }: SignedInVisit, state: KeysState, status = 200) => {
    const keys = await listKeys(pool, person.accountId);
    send(keysView(ctx, { keys, limit: MAX_NAMED_KEYS, ...state }), status);
  };
  /** The named key of the path, if it is active: the admin API's rule (the primary is regenerated, never revoked). */
  const pathKey = async ({ req, person }: SignedInVisit): Promise<string | undefined> => {
    const keyId = pathId(req, 'keyId');
    return keyId && (await activeKeyKind(pool, person.accountId, keyId)) === 'named' ? keyId : undefined;
  };

  return {
    nav: { href: '/keys', label: 'API keys' },
    routes: [
      get('/keys', (visit) =>
        render(visit, { notice: visit.req.query.done === 'revoked' ? 'The key is revoked.' : undefined }),
      ),

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

      post('/keys', async (visit) => {
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
        await render(
          visit,
          { newKey: { apiKey: created.value.apiKey, label: `Your new key “${name}”` } },
          201,
        );
      }),

      get('/keys/:keyId/revoke', async (visit) => {
        const keyId = await pathKey(visit);
        if (!keyId) return render(visit, { error: NO_SUCH_KEY }, 404);
        const key = (await listKeys(pool, visit.person.accountId)).find((k) => k.id === keyId);
        visit.send(confirmPage(visit.ctx, revoke({ id: keyId, name: key?.name ?? '' })));
      }),

      post('/keys/:keyId/revoke', async (visit) => {
        const keyId = await pathKey(visit);
        if (
          !keyId ||
          !(await revokeKey(
            pool,
            visit.person.accountId,
            keyId,
            dashboardActor(visit.req, visit.person.email),
          ))
        )
          return render(visit, { error: NO_SUCH_KEY }, 404);
        await waitForApiCaches();
        visit.res.redirect(303, '/keys?done=revoked');
      }),
    ],
  };
};

const keyText = (k: { prefix: string; last4: string }) => `${k.prefix}…${k.last4}`;

function keysView(ctx: PageContext, data: KeysState & { keys: KeyRecord[]; limit: number }): Html {
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
        ${confirmButton(ctx, REGENERATE)}
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
      </section>`,
  );
}
