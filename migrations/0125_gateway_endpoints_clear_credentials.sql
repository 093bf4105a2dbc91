-- Whether the plan refuses credentials sent in clear (spec.tls.refuseCredentialsInClear,
-- docs/adr/0072, 0096): written with the endpoint by the operator and by `npm start`. Read by
-- POST /api/v1/proxies/generate, which does not hand out the http:// form for such a plan. Only a
-- plan that serves TLS can refuse credentials in clear (its gateways do not start otherwise).
ALTER TABLE gateway_endpoints ADD COLUMN refuse_credentials_in_clear boolean NOT NULL DEFAULT false;
ALTER TABLE gateway_endpoints ADD CONSTRAINT gateway_endpoints_refuse_needs_tls
  CHECK (tls OR NOT refuse_credentials_in_clear);
