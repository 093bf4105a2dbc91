-- Where customers reach each plan's gateway: written by the operator from each ProxyGateway
-- (advertisedHost, port) and by `npm start` from its local YAML; read by
-- POST /api/v1/proxies/generate to build <host>:<port>:<username>:<password>.
CREATE TABLE gateway_endpoints (
  plan text PRIMARY KEY REFERENCES products (name),
  host text NOT NULL CHECK (length(host) BETWEEN 1 AND 253),
  port integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
  -- Who wrote it: 'dev' or 'ProxyGateway/<namespace>/<name>'.
  source text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
