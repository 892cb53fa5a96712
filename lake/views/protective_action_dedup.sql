-- protective_action_dedup is protective_action with each event once: one written row
-- per action, and one published row per `on` action the queue accepted. The consumer
-- writes at least once, and copies of an event share its occurred_at and so its
-- partition, which is why dt and hour lead the window partition (a filter on dt or hour
-- still prunes through the view). The earliest received copy is kept. Trino and DuckDB
-- both accept it.
CREATE OR REPLACE VIEW protective_action_dedup AS
SELECT
  event_id, event_type, occurred_at, schema_version, received_at,
  idempotency_key, phase, room_id, window_start, window_end, pipeline_version,
  verdict_revision, action, mode, source, rule_id, category, penalty,
  policy_version, policy_hash, reverses, offender,
  message_at, issued_at, expires_at, published_at, sends,
  dt, hour
FROM (
  SELECT *, row_number() OVER (PARTITION BY dt, hour, event_id ORDER BY received_at) AS copy_no
  FROM protective_action
) AS copies
WHERE copy_no = 1
