// The one module that imports @kubernetes/client-node (docs/design.md decision 2). client-node gives
// us kubeconfig loading, authentication (tokens, client certs, exec plugins, in-cluster service
// account) with its TLS dispatcher, and its Watch; requests go through its own HTTP library with a
// path we build, so every verb works the same on built-in and custom resources, on subresources
// (status), and with the content type each needs (server-side apply, merge patch). The rest of
// the runtime sees plain JSON objects and this interface only.
import {
  HttpMethod,
  IsomorphicFetchHttpLibrary,
  KubeConfig,
  RequestContext,
  Watch,
} from '@kubernetes/client-node';

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
}

/** Which REST collection a kind lives in (no discovery: every kind we touch is known). */
export interface Resource {
  group: string; // '' for the core group
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const apiVersionOf = (r: Resource) => (r.group ? `${r.group}/${r.version}` : r.version);

export function resourcePath(r: Resource, namespace?: string, name?: string, subresource?: string): string {
  let p = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  if (r.namespaced && namespace) p += `/namespaces/${encodeURIComponent(namespace)}`;
  p += `/${r.plural}`;
  if (name) p += `/${encodeURIComponent(name)}`;
  if (subresource) p += `/${subresource}`;
  return p;
}

/** A failed API call: the HTTP status and the Status object's reason (Conflict, NotFound, ...). */
export class KubeApiError extends Error {
  readonly status: number;
  readonly reason: string | undefined;
  constructor(status: number, reason: string | undefined, message: string) {
    super(message);
    this.name = 'KubeApiError';
    this.status = status;
    this.reason = reason;
  }
}

/**
 * Every write of the operator asks the API server to refuse fields the schema does not know
 * (unknown or duplicate), rather than drop them silently: a typo in our own code fails loudly.
 */
const STRICT: Record<string, string> = { fieldValidation: 'Strict' };

export const isNotFound = (err: unknown) => err instanceof KubeApiError && err.status === 404;
export const isConflict = (err: unknown) => err instanceof KubeApiError && err.status === 409;
export const isGone = (err: unknown) => err instanceof KubeApiError && err.status === 410;

export interface ListResult<T> {
  items: T[];
  resourceVersion: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchHandle {
  abort(): void;
}

export interface WatchOptions {
  namespace?: string;
  labelSelector?: string;
  resourceVersion: string;
  /** The server ends the watch after this long; the informer then resumes from its last version. */
  timeoutSeconds: number;
}

/** Per call: a signal that aborts it earlier than the client's own request timeout. */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface KubeClient {
  get<T extends KubeObject>(
    r: Resource,
    namespace: string | undefined,
    name: string,
    options?: CallOptions,
  ): Promise<T | undefined>;
  list<T extends KubeObject>(
    r: Resource,
    options?: { namespace?: string; labelSelector?: string },
  ): Promise<ListResult<T>>;
  /**
   * Starts a watch. `onDone(undefined)` when the server ended it normally, `onDone(err)` on any
   * failure (HTTP errors carry the status; a 410 in an ERROR event arrives as KubeApiError 410).
   */
  watch(
    r: Resource,
    options: WatchOptions,
    onEvent: (type: WatchEventType, object: KubeObject) => void,
    onDone: (err: Error | undefined) => void,
  ): Promise<WatchHandle>;
  /** Server-side apply (application/apply-patch+yaml; JSON is YAML) with our field manager. */
  apply<T extends KubeObject>(
    r: Resource,
    object: KubeObject,
    options: { fieldManager: string; subresource?: 'status'; force?: boolean },
  ): Promise<T>;
  /** JSON merge patch; include metadata.resourceVersion in the patch for an optimistic lock. */
  mergePatch<T extends KubeObject>(
    r: Resource,
    namespace: string | undefined,
    name: string,
    patch: unknown,
  ): Promise<T>;
  create<T extends KubeObject>(r: Resource, object: KubeObject, options?: CallOptions): Promise<T>;
  /**
   * GET of any API path as JSON, with extra headers (a Service's proxy subresource: the kubectl
   * plugin's usage; the API server drops Authorization once it has authenticated us).
   */
  getPath<T>(path: string, options?: CallOptions & { headers?: Record<string, string> }): Promise<T>;
  /** PUT; object.metadata.resourceVersion makes it conditional. */
  replace<T extends KubeObject>(r: Resource, object: KubeObject, options?: CallOptions): Promise<T>;
  /**
   * true when deleted, false when it did not exist. With `uid`, a precondition: the object is
   * deleted only if it is still that very object (never one someone else created under the name).
   */
  delete(
    r: Resource,
    namespace: string | undefined,
    name: string,
    options?: { uid?: string },
  ): Promise<boolean>;
}

/** Loads a kubeconfig: the file when given, else in-cluster, else ~/.kube/config (client-node's default order). */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return kc;
}

export function createKubeClient(
  kc: KubeConfig,
  options: {
    requestTimeoutMs?: number;
    /** Called with every response's method, status code and host (rest_client_requests_total). */
    onResponse?: (method: string, code: number, host: string) => void;
  } = {},
): KubeClient {
  const http = new IsomorphicFetchHttpLibrary();
  const timeoutMs = options.requestTimeoutMs ?? 30_000;
  const server = () => {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    return cluster.server.replace(/\/$/, '');
  };

  async function call<T>(
    method: HttpMethod,
    path: string,
    query: Record<string, string> = {},
    body?: unknown,
    contentType = 'application/json',
    signal?: AbortSignal,
    headers: Record<string, string> = {},
  ): Promise<T> {
    const url = new URL(server() + path);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const ctx = new RequestContext(url.toString(), method);
    ctx.setHeaderParam('Accept', 'application/json');
    for (const [k, v] of Object.entries(headers)) ctx.setHeaderParam(k, v);
    if (body !== undefined) {
      ctx.setHeaderParam('Content-Type', contentType);
      ctx.setBody(JSON.stringify(body));
    }
    const timeout = AbortSignal.timeout(timeoutMs);
    ctx.setSignal(signal ? AbortSignal.any([timeout, signal]) : timeout);
    await kc.applySecurityAuthentication(ctx);
    const res = await http.send(ctx).toPromise();
    options.onResponse?.(method, res.httpStatusCode, url.host);
    const text = await res.body.text();
    if (res.httpStatusCode >= 400) {
      let reason: string | undefined;
      let message = text;
      try {
        const status = JSON.parse(text) as { reason?: string; message?: string };
        reason = status.reason;
        message = status.message ?? text;
      } catch {
        // not a Status object
      }
      throw new KubeApiError(
        res.httpStatusCode,
        reason,
        `${method} ${path}: ${res.httpStatusCode} ${message}`,
      );
    }
    return (text ? JSON.parse(text) : undefined) as T;
  }

  const selectorQuery = (labelSelector?: string): Record<string, string> =>
    labelSelector ? { labelSelector } : {};

  return {
    async get<T extends KubeObject>(
      r: Resource,
      namespace: string | undefined,
      name: string,
      options: CallOptions = {},
    ) {
      try {
        return await call<T>(
          HttpMethod.GET,
          resourcePath(r, namespace, name),
          {},
          undefined,
          undefined,
          options.signal,
        );
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
    async list<T extends KubeObject>(
      r: Resource,
      options: { namespace?: string; labelSelector?: string } = {},
    ) {
      const items: T[] = [];
      let resourceVersion = '';
      let cont: string | undefined;
      do {
        const page = await call<{ items: T[]; metadata: { resourceVersion: string; continue?: string } }>(
          HttpMethod.GET,
          resourcePath(r, options.namespace),
          { ...selectorQuery(options.labelSelector), limit: '500', ...(cont ? { continue: cont } : {}) },
        );
        // Lists omit apiVersion/kind on items; restore them so objects look the same as watched ones.
        for (const item of page.items) items.push({ ...item, apiVersion: apiVersionOf(r), kind: r.kind });
        resourceVersion = page.metadata.resourceVersion;
        cont = page.metadata.continue || undefined;
      } while (cont);
      return { items, resourceVersion };
    },
    async watch(r, options, onEvent, onDone) {
      const watch = new Watch(kc);
      let finished = false;
      const done = (err: Error | undefined) => {
        if (finished) return;
        finished = true;
        onDone(err);
      };
      const controller = await watch.watch(
        resourcePath(r, options.namespace),
        {
          ...selectorQuery(options.labelSelector),
          resourceVersion: options.resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds: options.timeoutSeconds,
        },
        (type: string, object: unknown) => {
          if (finished) return;
          if (type === 'ERROR') {
            const status = object as { code?: number; reason?: string; message?: string };
            done(
              new KubeApiError(
                status.code ?? 500,
                status.reason,
                `watch ${r.plural}: ${status.message ?? 'error event'}`,
              ),
            );
            controller?.abort();
            return;
          }
          onEvent(type as WatchEventType, object as KubeObject);
        },
        (err: unknown) => {
          // client-node aborts a watch that has been silent for 30 s (TimeoutError): as quiet
          // as a server-side close, so the informer resumes at once rather than backing off.
          if (!err || (err as { name?: string }).name === 'TimeoutError') return done(undefined);
          const status = (err as { statusCode?: number }).statusCode;
          done(
            status
              ? new KubeApiError(status, undefined, `watch ${r.plural}: ${asError(err).message}`)
              : asError(err),
          );
        },
      );
      return {
        abort: () => {
          finished = true;
          controller.abort();
        },
      };
    },
    apply<T extends KubeObject>(
      r: Resource,
      object: KubeObject,
      options: { fieldManager: string; subresource?: 'status'; force?: boolean },
    ) {
      const { name, namespace } = object.metadata;
      return call<T>(
        HttpMethod.PATCH,
        resourcePath(r, namespace, name, options.subresource),
        { fieldManager: options.fieldManager, force: String(options.force ?? true), ...STRICT },
        object,
        'application/apply-patch+yaml',
      );
    },
    mergePatch<T extends KubeObject>(
      r: Resource,
      namespace: string | undefined,
      name: string,
      patch: unknown,
    ) {
      return call<T>(
        HttpMethod.PATCH,
        resourcePath(r, namespace, name),
        STRICT,
        patch,
        'application/merge-patch+json',
      );
    },
    create<T extends KubeObject>(r: Resource, object: KubeObject, options: CallOptions = {}) {
      return call<T>(
        HttpMethod.POST,
        resourcePath(r, object.metadata.namespace),
        STRICT,
        object,
        undefined,
        options.signal,
      );
    },
    replace<T extends KubeObject>(r: Resource, object: KubeObject, options: CallOptions = {}) {
      return call<T>(
        HttpMethod.PUT,
        resourcePath(r, object.metadata.namespace, object.metadata.name),
        STRICT,
        object,
        undefined,
        options.signal,
      );
    },
    getPath<T>(path: string, options: CallOptions & { headers?: Record<string, string> } = {}) {
      return call<T>(HttpMethod.GET, path, {}, undefined, undefined, options.signal, options.headers);
    },
    async delete(r, namespace, name, options = {}) {
      try {
        await call(
          HttpMethod.DELETE,
          resourcePath(r, namespace, name),
          {},
          {
            propagationPolicy: 'Background',
            ...(options.uid ? { preconditions: { uid: options.uid } } : {}),
          },
        );
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    },
  };
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
