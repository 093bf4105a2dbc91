// An explicit prom-client registry per process (never the global one: it throws "already
// registered" as soon as two components share a process, as they do in `npm start`).
import { Registry, collectDefaultMetrics } from 'prom-client';

export function createRegistry(component: string, defaults = true): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ component });
  if (defaults) collectDefaultMetrics({ register: registry, prefix: 'proxyfleet_' });
  return registry;
}
