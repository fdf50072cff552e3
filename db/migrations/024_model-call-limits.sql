-- Limits on model calls shared by every worker of a task queue (`BATON_MODEL_LIMITS`): per provider, or per
-- provider and model, requests and tokens per minute and calls at once. A call takes a lease before its request and
-- gives it back after; a lease whose worker died expires. Each request is logged with the tokens its reply used, and a
-- provider's `Retry-After` blocks its scope for every worker until then. Rows older than a minute are no longer
-- counted and are removed as calls come.
CREATE TABLE model_limit_leases (
  lease_id    text NOT NULL,
  scope       text NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (lease_id, scope)
);
CREATE INDEX model_limit_leases_scope_idx ON model_limit_leases (scope, expires_at);

CREATE TABLE model_limit_requests (
  lease_id    text NOT NULL,
  scope       text NOT NULL,
  sent_at     timestamptz NOT NULL DEFAULT now(),
  tokens      integer NOT NULL DEFAULT 0,
  PRIMARY KEY (lease_id, scope)
);
CREATE INDEX model_limit_requests_scope_idx ON model_limit_requests (scope, sent_at);

CREATE TABLE model_limit_blocks (
  scope       text PRIMARY KEY,
  until       timestamptz NOT NULL
);
