// Where a plan's gateways let traffic out (docs/api.md "GET /api/v1/locations", docs/adr/0100):
// the countries, states and cities of its exits, from the plan's endpoint row (written by the
// operator from the ProxyGateway's spec.exits, and by `npm start`). Generate asks `serves()`
// before handing out proxies for a target, so a customer hears at once, not at traffic time as a
// 503 no_exit, that nothing serves it.
import type { Pool } from '#common/db/pool.ts';
import { readGatewayEndpoint, type ServedLocation } from '#common/gateway-endpoints.ts';
import type { Product } from '#common/products.ts';

export interface Locations {
  product: Product;
  /** The plan's gateways said where their exits are; false: nothing is known and nothing is refused. */
  known: boolean;
  /** An exit takes any country ("*"). */
  everyCountry: boolean;
  countries: { country: string; states: { state: string; cities: string[] }[] }[];
}

export interface Target {
  country: string;
  state?: string | undefined;
  city?: string | undefined;
}

/** The gateway's own rule (gateway/src/proxy/exits.ts): "*" serves anything; else each given level must match. */
export const serves = (locations: readonly ServedLocation[], t: Target): boolean =>
  locations.some(
    (e) =>
      e.country === '*' ||
      (e.country === t.country && (!t.state || e.state === t.state) && (!t.city || e.city === t.city)),
  );

/** "country us, state texas, city dallas": the target as a refusal names it. */
export const targetText = (t: Target): string =>
  [
    `country ${t.country}`,
    ...(t.state ? [`state ${t.state}`] : []),
    ...(t.city ? [`city ${t.city}`] : []),
  ].join(', ');

/** The plan's exits' places, or undefined when its endpoint row says nothing about them. */
export async function servedLocations(pool: Pool, product: Product): Promise<ServedLocation[] | undefined> {
  return (await readGatewayEndpoint(pool, product))?.locations ?? undefined;
}

export async function locationsOf(pool: Pool, product: Product): Promise<Locations> {
  const served = await servedLocations(pool, product);
  const countries = new Map<string, Map<string, Set<string>>>();
  for (const e of served ?? []) {
    if (e.country === '*') continue;
    const states = countries.get(e.country) ?? new Map<string, Set<string>>();
    countries.set(e.country, states);
    if (!e.state) continue;
    const cities = states.get(e.state) ?? new Set<string>();
    states.set(e.state, cities);
    if (e.city) cities.add(e.city);
  }
  const sorted = <T>(items: Iterable<T>, key: (t: T) => string) =>
    [...items].sort((a, b) => key(a).localeCompare(key(b)));
  return {
    product,
    known: served !== undefined,
    everyCountry: (served ?? []).some((e) => e.country === '*'),
    countries: sorted(countries, ([c]) => c).map(([country, states]) => ({
      country,
      states: sorted(states, ([s]) => s).map(([state, cities]) => ({ state, cities: [...cities].sort() })),
    })),
  };
}
