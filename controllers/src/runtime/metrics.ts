// The runtime's metrics, registered once on the registry passed in and fed by whatever
// controllers and informers are running (they come and go with leadership).
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

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

  constructor(registry: Registry) {
    const sources = this.sources;
    this.reconcileDuration = new Histogram({
      name: 'proxyfleet_controller_reconcile_duration_seconds',
      help: 'Time one reconcile took, by controller and result (success, requeue, error)',
      labelNames: ['controller', 'result'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
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
  }
}
