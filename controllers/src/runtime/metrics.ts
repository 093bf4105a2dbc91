// The runtime's metrics, registered once on the registry passed in and fed by whatever
// controllers and informers are running (they come and go with leadership). Beside our own
// proxyfleet_controller_* series, the names and labels controller-runtime and client-go export
// (controller_runtime_reconcile_*, workqueue_*, rest_client_requests_total), so existing
// controller dashboards and alerts work unchanged.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { QueueHooks } from './queue.ts';

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** client-go's rest_client_requests_total, fed by createKubeClient's onResponse. */
export function restClientMetrics(registry: Registry): (method: string, code: number, host: string) => void {
  const counter = new Counter({
    name: 'rest_client_requests_total',
    help: 'Number of HTTP requests to the Kubernetes API, partitioned by status code, method, and host.',
    labelNames: ['code', 'method', 'host'],
    registers: [registry],
  });
  return (method, code, host) => counter.inc({ code: String(code), method, host });
}

/** The operator's controllers (controllers/src/operator.ts). */
const CONTROLLERS = ['proxygateway', 'apikey'];

export interface MetricSources {
  queues: Map<string, () => number>;
  informers: Map<string, () => number>;
}

export class ControllerMetrics {
  readonly reconcileDuration: Histogram<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller'>;
  readonly leader: Gauge;
  readonly sources: MetricSources = { queues: new Map(), informers: new Map() };
  /** controller-runtime's reconcile metrics (result: success, error, requeue_after). */
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrorsTotal: Counter<'controller'>;
  readonly reconcileTime: Histogram<'controller'>;
  private readonly workqueueAdds: Counter<'name'>;
  private readonly workqueueWait: Histogram<'name'>;
  private readonly workqueueRetries: Counter<'name'>;

  constructor(registry: Registry) {
    const sources = this.sources;
    this.reconcileDuration = new Histogram({
      name: 'proxyfleet_controller_reconcile_duration_seconds',
      help: 'Time one reconcile took, by controller and result (success, requeue, error)',
      labelNames: ['controller', 'result'],
      buckets: DURATION_BUCKETS,
      registers: [registry],
    });
    this.reconcileErrors = new Counter({
      name: 'proxyfleet_controller_reconcile_errors_total',
      help: 'Reconciles that failed and were re-queued with backoff',
      labelNames: ['controller'],
      registers: [registry],
    });
    // At zero from the start, on followers too: an alert on reconcile errors sees 0, not no data.
    for (const controller of CONTROLLERS) this.reconcileErrors.inc({ controller }, 0);
    new Gauge({
      name: 'proxyfleet_controller_queue_depth',
      help: 'Keys waiting in a controller work queue',
      labelNames: ['controller'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [name, depth] of sources.queues) this.set({ controller: name }, depth());
      },
    });
    new Gauge({
      name: 'proxyfleet_controller_watch_silence_seconds',
      help: 'Seconds since an informer last heard from the API server (list, event or bookmark)',
      labelNames: ['resource'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [name, silence] of sources.informers) this.set({ resource: name }, silence());
      },
    });
    this.leader = new Gauge({
      name: 'proxyfleet_controller_leader',
      help: '1 while this process holds the leader Lease',
      registers: [registry],
    });
    this.reconcileTotal = new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
      registers: [registry],
    });
    this.reconcileErrorsTotal = new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
      registers: [registry],
    });
    this.reconcileTime = new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets: DURATION_BUCKETS,
      registers: [registry],
    });
    new Gauge({
      name: 'workqueue_depth',
      help: 'Current depth of workqueue',
      labelNames: ['name'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [name, depth] of sources.queues) this.set({ name }, depth());
      },
    });
    this.workqueueAdds = new Counter({
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: ['name'],
      registers: [registry],
    });
    this.workqueueWait = new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: ['name'],
      buckets: [0.001, 0.01, 0.1, 1, 10, 100, 1000],
      registers: [registry],
    });
    this.workqueueRetries = new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: ['name'],
      registers: [registry],
    });
  }

  /** Hooks feeding the workqueue_* series of the queue called `name`. */
  queueHooks(name: string): QueueHooks {
    return {
      added: () => this.workqueueAdds.inc({ name }),
      waited: (seconds) => this.workqueueWait.observe({ name }, seconds),
      retried: () => this.workqueueRetries.inc({ name }),
    };
  }
}
