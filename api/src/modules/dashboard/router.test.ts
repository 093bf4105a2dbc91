import { describe, expect, it } from '@jest/globals';
import { get, post, signedOut, type DashboardDeps } from './page.ts';
import { PAGES, pathsOf } from './router.ts';

const noop = () => undefined;

describe('the dashboard path list', () => {
  it('is built from the pages: exact paths, one segment per parameter, case-sensitive', () => {
    const paths = pathsOf([
      { routes: [get('/', noop), signedOut.post('/sign-in', noop)] },
      { nav: [{ href: '/a.b', label: 'A' }], routes: [get('/a.b', noop), post('/a.b/:id/remove', noop)] },
    ]);
    for (const path of ['/', '/sign-in', '/a.b', '/a.b/123/remove', '/assets/dashboard.0123456789ab.js'])
      expect({ path, dashboard: paths.test(path) }).toEqual({ path, dashboard: true });
    for (const path of [
      '/A.b',
      '/a.b/',
      '/axb',
      '/a.b/1/2/remove',
      '/a.b//remove',
      '/sign-in/x',
      '/assets/a/b',
    ])
      expect({ path, dashboard: paths.test(path) }).toEqual({ path, dashboard: false });
  });

  it("leaves the API's paths to the API, and every navigation entry is one of the pages' paths", () => {
    const deps = {
      allowlist: { limit: 1, allowPrivate: false },
      subUsers: { limit: 1 },
      purchaseLimits: { perPurchaseGb: 1, perDayGb: 1 },
    } as DashboardDeps;
    const pages = PAGES.map((page) => page(deps));
    const paths = pathsOf(pages);
    for (const path of [
      '/api/v1/usage',
      '/admin/v1/accounts',
      '/healthz',
      '/metrics',
      '/api/v1/openapi.json',
    ])
      expect({ path, dashboard: paths.test(path) }).toEqual({ path, dashboard: false });
    const nav = pages.flatMap((p) => (p.nav ?? []).map((n) => n.href));
    expect(nav).toEqual([
      '/',
      '/usage',
      '/proxies',
      '/sub-users',
      '/billing',
      '/settings#api-keys',
      '/settings#alerts',
      '/settings',
      '/security',
      '/activity',
    ]);
    for (const href of nav) expect(paths.test(href.split('#')[0]!)).toBe(true);
  });
});
