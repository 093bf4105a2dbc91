-- Which api_keys row each ApiKey custom resource manages (the operator's own mapping; the REST
-- API's tables are unchanged). Keyed by the resource's uid: deleting and re-creating an ApiKey of
-- the same name is a new key. rotation is the spec.rotation the current key was issued for;
-- change_id the change_log id of the latest change to it, which caches must reach for "synced".
CREATE TABLE operator_api_keys (
  resource_uid uuid PRIMARY KEY,
  namespace text NOT NULL,
  name text NOT NULL,
  account_id uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
  api_key_id uuid UNIQUE REFERENCES api_keys (id) ON DELETE SET NULL,
  rotation integer NOT NULL CHECK (rotation >= 0),
  change_id bigint,
  rotated_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operator_api_keys_account_idx ON operator_api_keys (account_id);
