// Settings, as the spec names it: the API keys (the primary key shown once when regenerated, with
// Copy; Regenerate after a confirmation; named keys) and the alert toggles, on one page. The former
// Keys and Alerts pages answer with a redirect here (docs/adr/0100).
import { AppError } from '#common/errors.ts';
import { doneNotice } from '../forms.ts';
import { html } from '../html.ts';
import { layout, message } from '../layout.ts';
import { get, type PageModule, type SignedInVisit } from '../page.ts';
import { ALERT_NOTICES, alertRoutes, alertsSection, readAlertSettings } from '../settings-alerts.ts';
import { keyRoutes, keysSection, readKeys, SETTINGS, type KeysState } from '../settings-keys.ts';

const NOTICES: ReadonlyMap<string, string> = new Map([['revoked', 'The key is revoked.'], ...ALERT_NOTICES]);

/** Where the pages that Settings replaced send their visitors (a permanent move). */
const MOVED: ReadonlyArray<[string, string]> = [
  ['/keys', `${SETTINGS}#api-keys`],
  ['/alerts', `${SETTINGS}#alerts`],
];

export const settingsPage: PageModule = ({ pool, waitForApiCaches }) => {
  const render = async ({ person, ctx, send }: SignedInVisit, state: KeysState, status = 200) => {
    const [keys, alerts] = await Promise.all([
      readKeys(pool, person.accountId),
      readAlertSettings(pool, person.accountId),
    ]);
    const a = alerts.alerts;
    if (!a) throw new AppError('ACCOUNT_NOT_FOUND');
    const body = html`${message('error', state.error)}${message('success', state.notice)}
    ${keysSection(ctx, { keys, ...state })} ${alertsSection(ctx, { ...alerts, alerts: a })}`;
    send(layout(ctx, 'Settings', body), status);
  };

  return {
    // "API keys" and "Alerts" stay in the navigation, as links into this page's sections: browser
    // tests outside the project find those pages by these names.
    nav: [
      { href: `${SETTINGS}#api-keys`, label: 'API keys' },
      { href: `${SETTINGS}#alerts`, label: 'Alerts' },
      { href: SETTINGS, label: 'Settings' },
    ],
    routes: [
      get(SETTINGS, (visit) => render(visit, { notice: doneNotice(visit.req, NOTICES) })),
      ...keyRoutes(pool, waitForApiCaches, render),
      ...alertRoutes(pool, waitForApiCaches, (visit, error) => render(visit, { error }, 422)),
      ...MOVED.map(([from, to]) => get(from, ({ res }) => res.redirect(301, to))),
    ],
  };
};
