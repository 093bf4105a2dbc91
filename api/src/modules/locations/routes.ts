import { z } from 'zod';
import type { Pool } from '#common/db/pool.ts';
import { PRODUCTS, type Product } from '#common/products.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { locationsOf } from './service.ts';

const locationsQuery = z.strictObject({
  product: z
    .enum(PRODUCTS, { error: `must be one of ${PRODUCTS.join(', ')}` })
    .describe('The product whose gateways are asked'),
});

const locationsSchema = z.object({
  product: z.enum(PRODUCTS),
  known: z
    .boolean()
    .describe(
      "false: the plan's gateways have not said where their exits are; generate refuses no target then",
    ),
  everyCountry: z.boolean().describe('An exit takes any country ("*"): every country code is served'),
  countries: z.array(
    z.object({
      country: z.string().describe('Lowercase ISO 3166-1 alpha-2'),
      states: z.array(z.object({ state: z.string(), cities: z.array(z.string()) })),
    }),
  ),
});

export function locationsRoutes(pool: Pool): RouteDef[] {
  return [
    defineRoute<undefined, Record<string, string>, { product: Product }>({
      method: 'get',
      path: '/locations',
      tag: 'proxies',
      summary:
        "Where a product's gateways let traffic out: the countries, states and cities generate accepts",
      description:
        "From the exits of the plan's gateways. A target none of them serves is refused by POST /proxies/generate " +
        '(400 TARGET_NOT_SERVED). A state is served only by an exit labelled with it, a city likewise; "*" serves all.',
      auth: 'apiKey',
      query: locationsQuery,
      response: okSchema(locationsSchema),
      errors: ['VALIDATION_FAILED'],
      handler: async ({ query }) => ({ body: ok(await locationsOf(pool, query.product)) }),
    }),
  ];
}
