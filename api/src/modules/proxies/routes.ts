import { defineRoute, ok, type RouteDef } from '../../http/route.ts';
import { principal } from '../auth/middleware.ts';
import {
  generateRequestSchema,
  generateResponseSchema,
  listResponseSchema,
  type GenerateRequest,
} from './schemas.ts';
import { generateProxySet, ispProxies, type ProxiesDeps } from './service.ts';

export function proxiesRoutes(deps: ProxiesDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/proxies/list',
      tag: 'proxies',
      summary: "The account's static ISP proxies",
      auth: 'apiKey',
      response: listResponseSchema,
      handler: async ({ res }) => ({
        body: ok({ proxies: await ispProxies(deps, principal(res).accountId) }),
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
        '(409 CLEAR_CREDENTIALS_REFUSED) for a plan that refuses credentials sent in clear.',
      auth: 'apiKey',
      body: generateRequestSchema,
      response: generateResponseSchema,
      errors: [
        'VALIDATION_FAILED',
        'NO_BANDWIDTH',
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
