// Routes are declared as data: method, path, auth, zod schemas and a handler. The same
// declaration validates requests (mount) and generates /api/v1/openapi.json (openapi.ts), so the
// documentation cannot drift from what the server accepts.
import type { Request, RequestHandler, Response, Router } from 'express';
import { z } from 'zod';
import { AppError, formatMessage, type ErrorCode } from '#common/errors.ts';

export type AuthKind = 'apiKey' | 'admin' | 'none';
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface RouteResult {
  status?: number;
  body?: unknown;
  /** The body already serialised as JSON (hot paths cache it instead of stringifying per request). */
  json?: Buffer;
  /** A body that is not JSON (a CSV export, a PDF), sent as is with its content type. */
  raw?: { contentType: string; body: string | Buffer };
  headers?: Record<string, string>;
}

export interface RouteContext<B, P, Q = Record<string, unknown>> {
  body: B;
  params: P;
  /** The query string, validated by the route's `query` schema (else Express's parse). */
  query: Q;
  req: Request;
  res: Response;
}

export interface RouteDef<B = unknown, P = Record<string, string>, Q = Record<string, unknown>> {
  method: Method;
  /** Express path relative to the router's mount point, `:name` for parameters. */
  path: string;
  tag: string;
  summary: string;
  description?: string;
  auth: AuthKind;
  body?: z.ZodType<B>;
  params?: z.ZodType<P>;
  /** The query string (an object schema: its fields are the OpenAPI query parameters). */
  query?: z.ZodType<Q>;
  /** Code to answer when `params` do not validate (an id that cannot exist is "not found"). */
  paramsError?: ErrorCode;
  response?: z.ZodType;
  /**
   * The answers that are not JSON (`raw`), by media type, with what the body is: the OpenAPI
   * document lists them beside the JSON schema, and a raw answer of an undeclared type is a 500.
   */
  rawTypes?: Readonly<Record<string, string>>;
  /** Status of a successful answer (default 200); 204 sends no body. */
  status?: number;
  /** Error codes the route can answer with, for the OpenAPI document. */
  errors?: ErrorCode[];
  handler(ctx: RouteContext<B, P, Q>): Promise<RouteResult | undefined> | RouteResult | undefined;
}

/** Keeps the generic types of one route while collecting routes of different shapes in a list. */
export function defineRoute<B = undefined, P = Record<string, string>, Q = Record<string, unknown>>(
  def: RouteDef<B, P, Q>,
): RouteDef {
  return def as unknown as RouteDef;
}

/**
 * zod's own messages ("Invalid input: expected number, received string", "Too small: ...") in the
 * style of docs/errors.md ("must be a number"); messages our schemas write are kept.
 */
function problem(issue: z.core.$ZodIssue): string {
  if (!/^[A-Z]/.test(issue.message)) return issue.message.replace(/\.$/, '');
  switch (issue.code) {
    case 'invalid_type':
      // zod leaves `input` out of issues unless asked (reportInput): its message still says
      // "received undefined" for a missing field, and names the type for a wrong one.
      return ('input' in issue ? issue.input === undefined : /received undefined$/.test(issue.message))
        ? 'is required'
        : `must be ${issue.expected === 'int' ? 'an integer' : `a ${issue.expected}`}`;
    case 'too_small':
      if (issue.origin === 'string' && Number(issue.minimum) === 1) return 'must not be empty';
      return formatMessage(`must be at least {n${issue.origin === 'string' ? '|character' : ''}}`, {
        n: String(issue.minimum),
      });
    case 'too_big':
      return formatMessage(`must be at most {n${issue.origin === 'string' ? '|character' : ''}}`, {
        n: String(issue.maximum),
      });
    case 'invalid_format':
      return `must be a valid ${issue.format}`;
    case 'invalid_value':
      return `must be one of ${issue.values.map(String).join(', ')}`;
    default:
      return 'is invalid';
  }
}

/** One problem a schema found: the field's path ("trafficLimits.basic", '' for the whole input). */
export interface FieldProblem {
  field: string;
  /** What is wrong, in the words of docs/errors.md ("must be a number"). */
  problem: string;
  issue: z.core.$ZodIssue;
}

/** The first `max` problems of a refused input, each with its field. */
export function fieldProblems(error: z.ZodError, max = 3): FieldProblem[] {
  return error.issues
    .flatMap((issue): FieldProblem[] =>
      // A strict object names each unknown field on its own: "lifeTime: unknown field".
      issue.code === 'unrecognized_keys'
        ? issue.keys.map((key) => ({
            field: [...issue.path.map(String), key].join('.'),
            problem: 'unknown field',
            issue,
          }))
        : [{ field: issue.path.map(String).join('.'), problem: problem(issue), issue }],
    )
    .slice(0, max);
}

/** "count: must be an integer from 1 to 1000" -> which field, and what is wrong with it. */
export function validationError(error: z.ZodError): AppError {
  const detail = fieldProblems(error)
    .map((p) => (p.field ? `${p.field}: ${p.problem}` : p.problem))
    .join('; ');
  return new AppError('VALIDATION_FAILED', { detail });
}

/**
 * What a POST, PUT or PATCH route without a body schema takes: nothing, or `{}`. A field sent to
 * it is refused as on every other route ("force: unknown field"), never ignored in silence.
 */
const NO_BODY = z.strictObject({});
const TAKES_BODY = new Set<Method>(['post', 'put', 'patch']);

/**
 * Mounts each route behind its authentication and only then the body parsers, so an
 * unauthenticated caller gets 401 whatever it sends, and no unauthenticated body is parsed.
 */
export function mountRoutes(
  router: Router,
  routes: RouteDef[],
  auth: Record<AuthKind, RequestHandler[]>,
  bodyParsers: RequestHandler[],
): void {
  for (const route of routes) {
    router[route.method](
      route.path,
      ...auth[route.auth],
      ...bodyParsers,
      async (req: Request, res: Response) => {
        let params: unknown = req.params;
        if (route.params) {
          const parsed = route.params.safeParse(req.params);
          if (!parsed.success)
            throw route.paramsError ? new AppError(route.paramsError) : validationError(parsed.error);
          params = parsed.data;
        }
        let query: unknown = req.query;
        if (route.query) {
          const parsed = route.query.safeParse(req.query);
          if (!parsed.success) throw validationError(parsed.error);
          query = parsed.data;
        }
        let body: unknown;
        const schema = route.body ?? (TAKES_BODY.has(route.method) ? NO_BODY : undefined);
        if (schema) {
          const parsed = schema.safeParse(req.body ?? {});
          if (!parsed.success) throw validationError(parsed.error);
          if (route.body) body = parsed.data;
        }
        const result =
          (await route.handler({
            body,
            params: params as Record<string, string>,
            query: query as Record<string, unknown>,
            req,
            res,
          })) ?? {};
        if (result.headers) res.set(result.headers);
        const status = result.status ?? route.status ?? 200;
        if (status === 204) res.status(204).end();
        else if (result.raw) {
          const type = result.raw.contentType.split(';')[0]!.trim();
          if (!route.rawTypes?.[type])
            throw new Error(
              `${route.method} ${route.path} answered ${type}, which its rawTypes do not declare`,
            );
          res.status(status).type(result.raw.contentType).send(result.raw.body);
        } else if (result.json) res.status(status).type('application/json; charset=utf-8').send(result.json);
        else res.status(status).json(result.body);
      },
    );
  }
}

/** The JSON body of a success: the spec's responses carry `success: true`. */
export const ok = <T extends object>(body: T) => ({ success: true as const, ...body });

/**
 * The schema of a customer answer: `success: true`, then the resource (docs/adr/0012). Admin
 * answers use the resource's schema alone; api/src/http/success-answers.int.test.ts names any
 * customer answer whose schema lacks it.
 */
export const okSchema = <S extends z.ZodRawShape>(schema: z.ZodObject<S>) =>
  z.object({ success: z.literal(true) }).extend(schema.shape);
