-- Bandwidth leases and usage settlement (docs/adr/0020). All arithmetic happens here, under row
-- locks, so gateways and the worker cannot break the invariants by racing.
--
-- A lease's share of balances.leased_bytes ("what it still holds") is:
--   open:      granted_bytes - charged_bytes
--   released:  greatest(0, least(spent_bytes, granted_bytes) - charged_bytes)
-- i.e. after release it still holds exactly the bytes the gateway reported spending on it that
-- the fold has not charged yet (batches flushed but not folded). Folding a spend moves bytes
-- from leased_bytes to used_bytes in one statement, so no byte is ever counted in both or in
-- neither: total - used - leased (what can still be granted) never over-states what is left.
--
-- Lock order everywhere: lease rows (by id), then balance rows. usage_fold locks every lease it
-- touches before any balance row; lease_release locks one lease, then its balance.

-- What the gateway reported having spent on a lease when it released it (NULL while open).
ALTER TABLE bandwidth_leases ADD COLUMN spent_bytes bigint CHECK (spent_bytes >= 0);

-- Per batch, how many of its bytes were spent on which lease (a batch line can span two leases
-- of the same account and product when one runs out and the next is granted mid-flush).
CREATE TABLE usage_batch_lease_spend (
  batch_id bigint NOT NULL REFERENCES usage_batches (id) ON DELETE CASCADE,
  lease_id uuid NOT NULL REFERENCES bandwidth_leases (id) ON DELETE CASCADE,
  bytes bigint NOT NULL CHECK (bytes >= 0),
  PRIMARY KEY (batch_id, lease_id)
);
CREATE INDEX usage_batch_lease_spend_lease_idx ON usage_batch_lease_spend (lease_id);

-- lease_acquire(): created here at first; its one definition is migrations/functions/lease_acquire.sql (docs/adr/0084).

-- lease_release(): created here at first; its one definition is migrations/functions/lease_release.sql (docs/adr/0084).

-- usage_record(): created here at first; its one definition is migrations/functions/usage_record.sql (docs/adr/0084).

-- usage_fold(): created here at first; its one definition is migrations/functions/usage_fold.sql (docs/adr/0084).

-- lease_reap(): created here at first; its one definition is migrations/functions/lease_reap.sql (docs/adr/0084).

-- Sticky sessions (docs/adr/0022): when a session started, so every gateway pod derives the same
-- exit for it until its lifetime runs out, and a new one afterwards. key is sha256 of
-- (account, plan, session id, targeting).
CREATE TABLE sticky_sessions (
  key bytea PRIMARY KEY CHECK (octet_length(key) = 32),
  started_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX sticky_sessions_expires_idx ON sticky_sessions (expires_at);
