-- A call takes its places under the shared model limits (migration 024) in one statement instead of a transaction of
-- several (begin, a lock and a look per scope, the inserts, commit): the same locks, looks and inserts, in the order
-- they were made from the worker, one round trip. The statement's own transaction holds the advisory locks.
--
-- p_scopes: [{"scope", "concurrent"?, "requests_per_minute"?, "tokens_per_minute"?}], in the order to lock them.
-- Returns {"taken": true}, or {"taken": false, "scope", "reason", "wait_ms"} for the first scope without room (and
-- takes nothing).
CREATE FUNCTION model_limit_try_take(p_lease text, p_scopes jsonb, p_lease_seconds integer, p_poll_ms integer)
  RETURNS jsonb
  LANGUAGE plpgsql
AS $$
DECLARE
  s jsonb;
  v_scope text;
  v_blocked_ms bigint;
  v_leases bigint;
  v_requests bigint;
  v_request_free_ms bigint;
  v_tokens bigint;
  v_token_free_ms bigint;
BEGIN
  FOR s IN SELECT * FROM jsonb_array_elements(p_scopes) LOOP
    v_scope := s->>'scope';
    PERFORM pg_advisory_xact_lock(hashtext('baton-model-limit:' || v_scope));
    DELETE FROM model_limit_leases WHERE scope = v_scope AND expires_at <= now();
    DELETE FROM model_limit_requests WHERE scope = v_scope AND sent_at <= now() - interval '1 minute';
    SELECT ceil(extract(epoch FROM until - now()) * 1000) INTO v_blocked_ms
      FROM model_limit_blocks WHERE scope = v_scope AND until > now();
    IF v_blocked_ms IS NOT NULL THEN
      RETURN jsonb_build_object('taken', false, 'scope', v_scope, 'wait_ms', GREATEST(v_blocked_ms, 1),
                                'reason', 'the provider asked to wait (Retry-After)');
    END IF;
    IF s ? 'concurrent' THEN
      SELECT count(*) INTO v_leases FROM model_limit_leases WHERE scope = v_scope AND expires_at > now();
      IF v_leases >= (s->>'concurrent')::bigint THEN
        RETURN jsonb_build_object('taken', false, 'scope', v_scope, 'wait_ms', p_poll_ms,
                                  'reason', (s->>'concurrent') || ' call(s) at once');
      END IF;
    END IF;
    IF s ? 'requests_per_minute' OR s ? 'tokens_per_minute' THEN
      SELECT count(*), coalesce(sum(tokens), 0),
             ceil(extract(epoch FROM min(sent_at) + interval '1 minute' - now()) * 1000),
             ceil(extract(epoch FROM min(sent_at) FILTER (WHERE tokens > 0) + interval '1 minute' - now()) * 1000)
        INTO v_requests, v_tokens, v_request_free_ms, v_token_free_ms
        FROM model_limit_requests WHERE scope = v_scope AND sent_at > now() - interval '1 minute';
      IF s ? 'requests_per_minute' AND v_requests >= (s->>'requests_per_minute')::bigint THEN
        RETURN jsonb_build_object('taken', false, 'scope', v_scope, 'wait_ms', GREATEST(coalesce(v_request_free_ms, 1), 1),
                                  'reason', (s->>'requests_per_minute') || ' request(s) per minute');
      END IF;
      IF s ? 'tokens_per_minute' AND v_tokens >= (s->>'tokens_per_minute')::bigint THEN
        RETURN jsonb_build_object('taken', false, 'scope', v_scope, 'wait_ms', GREATEST(coalesce(v_token_free_ms, 1), 1),
                                  'reason', (s->>'tokens_per_minute') || ' token(s) per minute');
      END IF;
    END IF;
  END LOOP;
  INSERT INTO model_limit_leases (lease_id, scope, expires_at)
    SELECT p_lease, e->>'scope', now() + make_interval(secs => p_lease_seconds) FROM jsonb_array_elements(p_scopes) e;
  INSERT INTO model_limit_requests (lease_id, scope)
    SELECT p_lease, e->>'scope' FROM jsonb_array_elements(p_scopes) e;
  RETURN jsonb_build_object('taken', true);
END
$$;
