-- Where each plan's gateways let traffic out (ProxyGateway spec.exits: country, state, city; "*"
-- for any country), written with the endpoint by the operator and by `npm start`. Read by
-- GET /api/v1/locations and by POST /api/v1/proxies/generate, which refuses a target no exit
-- serves (docs/adr/0100). NULL: the writer did not say (a row written before this column), and
-- nothing is refused for it.
ALTER TABLE gateway_endpoints ADD COLUMN locations jsonb
  CONSTRAINT gateway_endpoints_locations_array CHECK (locations IS NULL OR jsonb_typeof(locations) = 'array');
