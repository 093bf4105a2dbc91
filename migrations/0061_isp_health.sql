-- Server alerts (docs/alerts.md): the worker health-checks the ISP proxies of accounts with
-- server alerts on. One row of state per proxy, and the history of its transitions.
CREATE TABLE isp_proxy_health (
  proxy_id uuid PRIMARY KEY REFERENCES isp_proxies (id) ON DELETE CASCADE,
  -- unknown: not checked yet (or not since alerts were turned on); online; offline: two
  -- consecutive failed connects; error: it accepts connections but the proxied request fails.
  state text NOT NULL DEFAULT 'unknown' CHECK (state IN ('unknown', 'online', 'offline', 'error')),
  connect_failures integer NOT NULL DEFAULT 0 CHECK (connect_failures >= 0),
  detail text,
  checked_at timestamptz,
  changed_at timestamptz,
  -- Spread over the interval: a new row is due at a random point of the first interval.
  next_check_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX isp_proxy_health_due_idx ON isp_proxy_health (next_check_at);

CREATE TABLE isp_proxy_health_history (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  proxy_id uuid NOT NULL REFERENCES isp_proxies (id) ON DELETE CASCADE,
  from_state text NOT NULL,
  to_state text NOT NULL,
  detail text,
  at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX isp_proxy_health_history_proxy_idx ON isp_proxy_health_history (proxy_id, at);
