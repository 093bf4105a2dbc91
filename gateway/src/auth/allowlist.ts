// The IP allowlist of one process (docs/adr/0036): per product, the entries of every account, found
// by longest prefix match on a connection's source address. Entries are keyed by their network
// bytes under each prefix length in use, so a lookup is one Map probe per length (at most 9 for
// IPv4 and 81 for IPv6 under the widest-range limit), whatever the number of entries.
import { addressBytes, maskTo } from '#common/ip-allowlist.ts';

export interface AllowEntry {
  id: string;
  accountId: string;
  product: string;
  /** As PostgreSQL prints it: `203.0.113.0/24`, `2001:db8::/48`. */
  cidr: string;
  /** The targeting suffix in the plan's grammar (docs/adr/0003); null: rotating, any country. */
  targeting: string | null;
}

interface Family {
  /** Prefix lengths with entries, longest first. */
  lengths: number[];
  byKey: Map<string, AllowEntry>;
}

const key = (bytes: Buffer, prefix: number) => `${prefix}/${bytes.toString('hex')}`;

export class AllowlistIndex {
  private readonly products = new Map<string, { 4: Family; 6: Family }>();

  add(e: AllowEntry): void {
    const parsed = parseEntry(e.cidr);
    if (!parsed) return;
    let p = this.products.get(e.product);
    if (!p) this.products.set(e.product, (p = { 4: family(), 6: family() }));
    const f = p[parsed.bytes.length === 4 ? 4 : 6];
    f.byKey.set(key(parsed.bytes, parsed.prefix), e);
    if (!f.lengths.includes(parsed.prefix)) f.lengths = [...f.lengths, parsed.prefix].sort((a, b) => b - a);
  }

  remove(e: AllowEntry): void {
    const parsed = parseEntry(e.cidr);
    const f = parsed && this.products.get(e.product)?.[parsed.bytes.length === 4 ? 4 : 6];
    const k = parsed && key(parsed.bytes, parsed.prefix);
    if (f && k && f.byKey.get(k) === e) f.byKey.delete(k);
    // Lengths left without entries cost one probe each until the process restarts: harmless.
  }

  /** The entry of `product` covering `address` with the longest prefix, if any. */
  find(product: string, address: string): AllowEntry | undefined {
    const p = this.products.get(product);
    if (!p) return undefined;
    const bytes = addressBytes(address);
    if (!bytes) return undefined;
    const f = p[bytes.length === 4 ? 4 : 6];
    for (const length of f.lengths) {
      const hit = f.byKey.get(key(maskTo(bytes, length), length));
      if (hit) return hit;
    }
    return undefined;
  }
}

function family(): Family {
  return { lengths: [], byKey: new Map() };
}

function parseEntry(cidr: string): { bytes: Buffer; prefix: number } | undefined {
  const slash = cidr.indexOf('/');
  const bytes = addressBytes(slash < 0 ? cidr : cidr.slice(0, slash));
  if (!bytes) return undefined;
  const prefix = slash < 0 ? bytes.length * 8 : Number(cidr.slice(slash + 1));
  return { bytes: maskTo(bytes, prefix), prefix };
}
