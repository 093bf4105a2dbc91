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
