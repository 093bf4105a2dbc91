// The dashboard's forms (docs/adr/0061): a posted form is read as typed, judged by the API's own
// schema, and when refused comes back with what was typed and one message that names each field by
// its label. Nothing typed is lost; every page says a refusal the same way.
import type { Request } from 'express';
import type { z } from 'zod';
import { AppError } from '#common/errors.ts';
import { fieldProblems } from '#api/http/route.ts';
import { uuid } from '#api/http/schemas.ts';

/**
 * The named fields of a posted form, as typed: '' when absent or not one string. Trimmed, except
 * the `untrimmed` ones (a password's spaces are part of it).
 */
export function formValues<K extends string>(
  body: unknown,
  names: readonly K[],
  untrimmed: readonly K[] = [],
): Record<K, string> {
  const fields = (body ?? {}) as Record<string, unknown>;
  const values = {} as Record<K, string>;
  for (const name of names) {
    const value = fields[name];
    values[name] = typeof value !== 'string' ? '' : untrimmed.includes(name) ? value : value.trim();
  }
  return values;
}

/**
 * How a form names a field, and, where the form says better what the field takes than the
 * schema's words ("a whole number from 1 to 99"), what it says instead.
 */
export type FieldWords = string | { label: string; says: string | ((issue: z.core.$ZodIssue) => string) };

/**
 * "Name: must be 1 to 64 letters... Bandwidth cap: must be at least 65536." The problems the
 * schema found, as the API words them (http/route.ts fieldProblems), the first of each field,
 * named by the form's label. The one way a refused form is explained.
 */
export function formProblem(error: z.ZodError, fields: Readonly<Record<string, FieldWords>>): string {
  const said = new Set<string>();
  return fieldProblems(error, Infinity)
    .filter(({ field }) => !said.has(field) && said.add(field))
    .map(({ field, problem, issue }) => {
      const words = fields[field];
      if (words === undefined) return `${field || 'The form'}: ${problem}.`;
      if (typeof words === 'string') return `${words}: ${problem}.`;
      return `${words.label}: ${typeof words.says === 'string' ? words.says : words.says(issue)}.`;
    })
    .join(' ');
}

/** The id in the path parameter `name`, if it is a uuid (another cannot name a row). */
export function pathId(req: Request, name: string): string | undefined {
  const id = String(req.params[name]);
  return uuid.safeParse(id).success ? id : undefined;
}

/** The notice named by a redirect's `?done=` (a Map: `?done=constructor` finds nothing). */
export const doneNotice = (req: Request, notices: ReadonlyMap<string, string>): string | undefined =>
  typeof req.query.done === 'string' ? notices.get(req.query.done) : undefined;

/**
 * Runs an operation whose refusals (an AppError that `refusable` accepts: a conflict, by default)
 * are said on the form instead of failing the request.
 */
export async function attempt<T>(
  operation: () => Promise<T>,
  refusable: (err: AppError) => boolean = (err) => err.status === 409,
): Promise<{ ok: true; value: T } | { ok: false; refusal: AppError }> {
  try {
    return { ok: true, value: await operation() };
  } catch (err) {
    if (err instanceof AppError && refusable(err)) return { ok: false, refusal: err };
    throw err;
  }
}
