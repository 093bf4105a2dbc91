-- Which cache version each running API and gateway process has applied (the highest change_log id
-- it has processed). Processes write their row when they apply changes and on a heartbeat; the
-- ApiKey controller counts the fresh rows at or above a change's id to report "5/5 synced".
CREATE TABLE cache_acks (
  instance text PRIMARY KEY,
  component text NOT NULL CHECK (component IN ('api', 'gateway')),
  version bigint NOT NULL CHECK (version >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cache_acks_component_idx ON cache_acks (component, updated_at);
