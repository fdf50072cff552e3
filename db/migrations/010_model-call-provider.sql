-- Which endpoint answered each model call: the provider (a name from BATON_PROVIDERS, or 'default' for the worker's
-- own endpoint) and the model name sent there, without the provider prefix. Set on assistant messages only; NULL on
-- human and tool messages, and on replies stored before this migration (every one of them came from the default
-- endpoint, but the model name sent is not known, so nothing is filled in). Nullable columns without a default: no
-- table rewrite.
ALTER TABLE transcript_messages
  ADD COLUMN provider text,
  ADD COLUMN model text;
