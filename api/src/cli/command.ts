// What every `npx proxyfleet admin` command is (main.ts runs them), and the option parsing the
// command tables share.
export interface Command {
  usage: string;
  summary: string;
  /** Positional arguments, in order. */
  args: string[];
  options?: Record<
    string,
    { type: 'string' | 'boolean'; required?: boolean; multiple?: boolean; help: string }
  >;
  request(
    args: Record<string, string>,
    options: Record<string, string | boolean | string[] | undefined>,
  ): { method: string; path: string; body?: unknown };
}

export type OptionValue = string | boolean | string[] | undefined;

export class UsageError extends Error {}

export const num = (value: OptionValue, name: string): number | undefined => {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (typeof value !== 'string' || value.trim() === '' || !Number.isFinite(n))
    throw new UsageError(`--${name} must be a number`);
  return n;
};

/** A number, or null for `none` (a cap removed). */
export const numOrNone = (value: OptionValue, name: string): number | null | undefined =>
  value === 'none' ? null : num(value, name);

export const onOff = (value: OptionValue, name: string): boolean | undefined => {
  if (value === undefined) return undefined;
  if (value === 'on' || value === 'true') return true;
  if (value === 'off' || value === 'false') return false;
  throw new UsageError(`--${name} must be on or off`);
};

/** A GET of `path` with the string options named in `keys` as its query. */
export const getWith = (path: string, o: Record<string, OptionValue>, keys: string[]) => {
  const q = new URLSearchParams();
  for (const k of keys) if (typeof o[k] === 'string') q.set(k, o[k]);
  return { method: 'GET', path: q.size ? `${path}?${q.toString()}` : path };
};
