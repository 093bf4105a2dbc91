// The gateways file `npm start` reads (PROXYFLEET_DEV_GATEWAYS), written by the dev tests: one
// ProxyGateway per plan on a port of the test's, exiting directly, in every country.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

export async function writeDevGateways(
  dir: string,
  gateways: Array<{ plan: string; port: number }>,
  advertisedHost = '127.0.0.1',
): Promise<string> {
  const file = path.join(dir, 'gateways.yaml');
  const doc = ({ plan, port }: { plan: string; port: number }) =>
    [
      'apiVersion: proxyfleet.io/v1alpha1',
      'kind: ProxyGateway',
      `metadata: { name: ${plan} }`,
      `spec: { plan: ${plan}, port: ${port}, advertisedHost: ${advertisedHost}, exits: [{ name: direct, country: '*' }] }`,
    ].join('\n');
  await writeFile(file, `${gateways.map(doc).join('\n---\n')}\n`);
  return file;
}
