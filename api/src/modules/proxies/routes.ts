import { defineRoute, ok, type RouteDef } from '#api/http/route.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import {
  generateRequestSchema,
  generateResponseSchema,
  listQuerySchema,
  listResponseSchema,
  type GenerateRequest,
  type ListQuery,
} from './schemas.ts';
import { generateProxySet, ispProxyList, type ProxiesDeps } from './service.ts';

export function proxiesRoutes(deps: ProxiesDeps): RouteDef[] {
  return [
    defineRoute<undefined, Record<string, string>, ListQuery>({
      method: 'get',
      path: '/proxies/list',
      tag: 'proxies',
      summary: "The account's static ISP proxies",
      description:
        'With `format` (colon, url, csv, json, template; `template` with {host} {port} {user} {pass}), also the ' +
        'list as `lines` or `entries` (docs/api.md "Proxy list formats"); URLs are http://.',
      auth: 'apiKey',
      query: listQuerySchema,
      response: listResponseSchema,
      errors: ['VALIDATION_FAILED'],
      handler: async ({ res, query }) => ({
        body: ok(await ispProxyList(deps, principal(res).accountId, query)),
      }),
    }),
    defineRoute<GenerateRequest>({
      method: 'post',
      path: '/proxies/generate',
      tag: 'proxies',
      summary: 'Generate proxy strings for a plan',
      description:
        "Returns `count` strings `<host>:<port>:<username>:<password>` in the plan's credential format. " +
        'Sticky proxies each get a fresh random session id; rotating proxies are identical lines. ' +
        "With `subUser`, the strings carry that sub-user's username and password. " +
        'With `scheme` (`http` or `https`), also `urls`: the same proxies as URLs; `https` is TLS to the gateway, ' +
        'refused (409 TLS_NOT_SERVED) for a plan whose gateways do not serve it; `http` is refused ' +
        '(409 CLEAR_CREDENTIALS_REFUSED, as is `socks5h`) for a plan that refuses credentials sent in clear; ' +
        '`socks5h` is SOCKS5 on the same port. With `format` (colon, url, csv, json, template; `template` with ' +
        '{host} {port} {user} {pass}), also the list as `lines` or `entries` (docs/api.md "Proxy list formats").',
      auth: 'apiKey',
      body: generateRequestSchema,
      response: generateResponseSchema,
      errors: [
        'VALIDATION_FAILED',
        'NO_BANDWIDTH',
        'TARGET_NOT_SERVED',
        'SUB_USER_NOT_FOUND',
        'TLS_NOT_SERVED',
        'CLEAR_CREDENTIALS_REFUSED',
        'MALFORMED_JSON',
        'UNSUPPORTED_MEDIA_TYPE',
        'PAYLOAD_TOO_LARGE',
      ],
      handler: async ({ res, body }) => ({
        body: ok(await generateProxySet(deps, principal(res).accountId, body)),
      }),
    }),
  ];
}
