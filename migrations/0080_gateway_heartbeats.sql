-- Gateway heartbeats (docs/adr/0025): every gateway writes its row every few seconds; the leases
-- of a gateway whose row is older than gateway_dead_after() are reclaimed by whoever notices
-- first (lease_acquire for the balance it draws from, the worker's lease_reap for all of them),
-- instead of blocking the customer until the lease's TTL (300 s) runs out.
--
-- A gateway with no row (an older version, or a process that does not heartbeat) is never judged
-- dead: its leases still come back through their TTL only.
CREATE TABLE gateway_heartbeats (
  gateway_id text PRIMARY KEY CHECK (length(gateway_id) BETWEEN 1 AND 253),
  plan text NOT NULL REFERENCES products (name),
  -- The process behind the id: a restarted pod keeps its name but is a new process.
  boot_id text NOT NULL CHECK (length(boot_id) BETWEEN 1 AND 64),
  started_at timestamptz NOT NULL DEFAULT now(),
  beat_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gateway_heartbeats_plan_beat_idx ON gateway_heartbeats (plan, beat_at);
CREATE INDEX bandwidth_leases_gateway_idx ON bandwidth_leases (gateway_id) WHERE released_at IS NULL;

-- gateway_dead_after(): created here at first; its one definition is migrations/functions/gateway_dead_after.sql (docs/adr/0084).

-- lease_reclaim(): created here at first; its one definition is migrations/functions/lease_reclaim.sql (docs/adr/0084).

-- lease_reap: changed here when this migration was written; its one definition is now migrations/functions/lease_reap.sql (docs/adr/0074), so the restatement is gone.

-- lease_acquire: changed here when this migration was written; its one definition is now migrations/functions/lease_acquire.sql (docs/adr/0074), so the restatement is gone.

-- gateway_register(): created here at first; its one definition is migrations/functions/gateway_register.sql (docs/adr/0084).

-- gateway_heartbeat(): created here at first; its one definition is migrations/functions/gateway_heartbeat.sql (docs/adr/0084).

-- gateway_deregister(): created here at first; its one definition is migrations/functions/gateway_deregister.sql (docs/adr/0084).
