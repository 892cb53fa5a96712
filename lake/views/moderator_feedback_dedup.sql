-- moderator_feedback_dedup is moderator_feedback with each event once. The consumer writes at least
-- once: a crash between writing an object and deleting its messages writes
-- those events again in a later object. Copies of an event share its
-- occurred_at and so its partition, which is why dt and hour lead the window
-- partition: a filter on dt or hour then still prunes partitions through the
-- view. The earliest received copy is kept. Trino and DuckDB both accept it.
CREATE OR REPLACE VIEW moderator_feedback_dedup AS
SELECT
  event_id, event_type, occurred_at, schema_version, received_at,
  room_id, window_start, window_end, pipeline_version, moderator_id,
  verdict_label, verdict_category, decided_label, decided_category, action_taken,
  audit,
  dt, hour
FROM (
  SELECT *, row_number() OVER (PARTITION BY dt, hour, event_id ORDER BY received_at) AS copy_no
  FROM moderator_feedback
) AS copies
WHERE copy_no = 1
