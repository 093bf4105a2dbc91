// /api/v1/openapi.json, generated from the route declarations and the same zod schemas that
// validate requests (http/route.ts), so the document and the server cannot disagree.
import { z } from 'zod';
import { ERRORS, type ErrorCode } from '#common/errors.ts';
import type { RouteDef } from './route.ts';

export interface RouteGroup {
  prefix: string;
  routes: RouteDef[];
}

const jsonSchema = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, { target: 'openapi-3.0', io, unrepresentable: 'any' });

const errorRef = { $ref: '#/components/schemas/Error' };

/** One OpenAPI query parameter per field of the route's query object schema. */
function queryParameters(query: z.ZodType | undefined): Record<string, unknown>[] {
  if (!query) return [];
  const schema = jsonSchema(query, 'input') as {
    properties?: Record<string, Record<string, unknown>>;
    required?: string[];
  };
  return Object.entries(schema.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: 'query',
      required: schema.required?.includes(name) ?? false,
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

/** A success answer's media types: the JSON schema, and each declared raw type (a CSV, a PDF). */
function successContent(route: RouteDef): { content?: Record<string, unknown> } {
  const content: Record<string, unknown> = {};
  if (route.response) content['application/json'] = { schema: jsonSchema(route.response, 'output') };
  for (const [type, what] of Object.entries(route.rawTypes ?? {}))
    content[type] = {
      schema: {
        type: 'string',
        description: what,
        ...(type.startsWith('text/') ? {} : { format: 'binary' }),
      },
    };
  return Object.keys(content).length > 0 ? { content } : {};
}

export function openApiDocument(groups: RouteGroup[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const group of groups) {
    for (const route of group.routes) {
      const path = (group.prefix + route.path).replace(/:(\w+)/g, '{$1}');
      const params: Record<string, unknown>[] = [...route.path.matchAll(/:(\w+)/g)].map((m) => ({
        name: m[1],
        in: 'path',
        required: true,
        schema: { type: 'string' },
      }));
      params.push(...queryParameters(route.query));
      const status = String(route.status ?? 200);
      const responses: Record<string, unknown> = {
        [status]:
          status === '204' ? { description: 'Done' } : { description: 'Success', ...successContent(route) },
      };
      const codes: ErrorCode[] = [...(route.errors ?? [])];
      if (route.auth === 'apiKey') codes.push('INVALID_API_KEY', 'CONFLICTING_API_KEYS', 'RATE_LIMITED');
      if (route.auth === 'admin') codes.push('INVALID_ADMIN_TOKEN');
      for (const code of codes) {
        const key = String(ERRORS[code].status);
        const previous = responses[key] as { description: string } | undefined;
        const text = `${code}: ${ERRORS[code].message}`;
        responses[key] = {
          description: previous ? `${previous.description}; ${text}` : text,
          content: { 'application/json': { schema: errorRef } },
        };
      }
      paths[path] ??= {};
      paths[path][route.method] = {
        tags: [route.tag],
        summary: route.summary,
        ...(route.description ? { description: route.description } : {}),
        security:
          route.auth === 'apiKey'
            ? [{ ApiKeyHeader: [] }, { ApiKeyBearer: [] }]
            : route.auth === 'admin'
              ? [{ AdminToken: [] }]
              : [],
        ...(params.length ? { parameters: params } : {}),
        ...(route.body
          ? {
              requestBody: {
                required: true,
                content: { 'application/json': { schema: jsonSchema(route.body, 'input') } },
              },
            }
          : {}),
        responses,
      };
    }
  }
  return {
    openapi: '3.0.3',
    info: {
      title: 'proxyfleet API',
      version,
      description:
        'Customer API (/api/v1, API key) and operator API (/admin/v1, admin token). See docs/api.md.',
    },
    paths,
    components: {
      securitySchemes: {
        ApiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        ApiKeyBearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer svc_live_...' },
        AdminToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'Authorization: Bearer <PROXYFLEET_ADMIN_TOKEN>',
        },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['success', 'error'],
          properties: { success: { type: 'boolean', enum: [false] }, error: { type: 'string' } },
        },
      },
    },
  };
}
