// Activity: the account's audit log (docs/security.md "Audit log", docs/dashboard.md "Activity"),
// newest first, a page at a time with "Older" (the cursor of GET /api/v1/audit-log) and back to
// "Newest". The same reads as the API (audit-log/repo.ts); who acted is named as the customer
// knows it: the signed-in email, the API key's display prefix, "operator", or the component.
import { listKeys } from '#common/accounts/keys.ts';
import { readAuditLog } from '#api/modules/audit-log/repo.ts';
import { decodeCursor, type AuditEntryView } from '#api/modules/audit-log/schemas.ts';
import { html, type Html } from '../html.ts';
import { dateText, layout, message, table, type PageContext } from '../layout.ts';
import { get, type PageModule } from '../page.ts';

/** Entries per page. */
export const ACTIVITY_PAGE = 50;
const BAD_CURSOR = 'That page of the activity does not exist. The newest entries are shown.';

/** Words for the resources of `<resource>.<verb>`; any other is shown with its underscores as spaces. */
const RESOURCES: Record<string, string> = {
  api_key: 'API key',
  ip_allowlist: 'IP allowlist',
  isp_proxy: 'ISP proxy',
  sub_user: 'Sub-user',
  auto_refill: 'Auto-refill',
  credit_limit: 'Credit limit',
  target_stats: 'Target statistics',
  proxy_password: 'Proxy password',
  two_factor: 'Two-factor authentication',
};

/** api_key.created -> "API key created". */
export function actionText(action: string): string {
  const [resource = '', verb = ''] = action.split('.');
  const words = RESOURCES[resource] ?? resource.replaceAll('_', ' ');
  const text = `${words} ${verb.replaceAll('_', ' ')}`;
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export const activityPage: PageModule = ({ pool }) => ({
  nav: [{ href: '/activity', label: 'Activity' }],
  routes: [
    get('/activity', async ({ req, person, ctx, send }) => {
      const asked = typeof req.query.cursor === 'string' ? req.query.cursor : undefined;
      const cursor = asked === undefined ? undefined : decodeCursor(asked);
      const bad = asked !== undefined && cursor === undefined;
      const [page, keys] = await Promise.all([
        readAuditLog(pool, person.accountId, { limit: ACTIVITY_PAGE, cursor }),
        listKeys(pool, person.accountId),
      ]);
      const keyNames = new Map(keys.map((k) => [k.id, `${k.name} (${k.prefix}…${k.last4})`]));
      send(
        activityView(ctx, {
          entries: page.entries,
          nextCursor: page.nextCursor,
          paged: cursor !== undefined,
          keyNames,
          ...(bad ? { error: BAD_CURSOR } : {}),
        }),
        bad ? 400 : 200,
      );
    }),
  ],
});

function actorText(e: AuditEntryView, keyNames: ReadonlyMap<string, string>): string {
  switch (e.actor.kind) {
    case 'api_key':
      return `API key ${keyNames.get(e.actor.id) ?? e.actor.id}`;
    case 'admin':
      return 'Operator';
    case 'system':
      return `System (${e.actor.id})`;
    default:
      return e.actor.id;
  }
}

/** The details as "name: value" pairs (values as JSON when they are not plain). */
function detailsText(details: Record<string, unknown>): string {
  return Object.entries(details)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(', ');
}

function activityView(
  ctx: PageContext,
  data: {
    entries: AuditEntryView[];
    nextCursor: string | null;
    paged: boolean;
    keyNames: ReadonlyMap<string, string>;
    error?: string;
  },
): Html {
  const paging = html`<nav class="pager" aria-label="Activity pages">
    ${data.paged || data.error ? html`<a href="/activity">Newest</a>` : ''}
    ${data.nextCursor ? html`<a href="/activity?cursor=${data.nextCursor}" rel="next">Older</a>` : ''}
  </nav>`;
  return layout(
    ctx,
    'Activity',
    html`${message('error', data.error)}
      <p>
        Every change to your account: who made it, from which address, and what changed. Secrets (keys,
        passwords, codes) are never recorded.
      </p>
      ${
        data.entries.length === 0
          ? html`<p>No activity ${data.paged ? 'older than this' : 'yet'}.</p>`
          : table({
              label: 'Activity',
              caption: 'Changes to the account, newest first',
              columns: ['When', 'Who', 'Address', 'What', 'Details'],
              rows: data.entries.map(
                (e) =>
                  html`<tr>
                    <td>${dateText(new Date(e.at))}</td>
                    <td>${actorText(e, data.keyNames)}</td>
                    <td>${e.actor.ip ?? ''}</td>
                    <td>${actionText(e.action)}</td>
                    <td>${detailsText(e.details)}</td>
                  </tr>`,
              ),
            })
      }
      ${paging}`,
  );
}
