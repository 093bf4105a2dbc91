-- Whether the plan's gateways serve TLS on their port (docs/adr/0071, 0083): written with the
-- endpoint by the operator (the ProxyGateway has spec.tls) and by `npm start` (its gateways have
-- PROXYFLEET_GATEWAY_TLS_CERT/_KEY). Read by POST /api/v1/proxies/generate, which refuses the
-- https:// form for a plan without it, and by the dashboard's Proxies page, which offers it only
-- for plans with it.
ALTER TABLE gateway_endpoints ADD COLUMN tls boolean NOT NULL DEFAULT false;
