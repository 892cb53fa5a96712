-- moderator_feedback_dedup is moderator_feedback with each decision in force once. The consumer writes at least
-- once: a crash between writing an object and deleting its messages writes
-- those events again in a later object. Copies of an event share its
-- occurred_at and so its partition, which is why dt and hour lead the window
-- partition: a filter on dt or hour then still prunes partitions through the
-- view. The earliest received copy is kept. Trino and DuckDB both accept it.
-- A moderator's undo (decision 'undo') takes back the decision whose event
-- reverses_event_id names: the view leaves out both, so every agreement and
-- labelled-set query counts only decisions in force. The undo may fall in a
-- later partition than its decision, so its lookup reads every partition of
-- two small columns (decision, reverses_event_id); undos are in the raw table.
CREATE OR REPLACE VIEW moderator_feedback_dedup AS
SELECT
  event_id, event_type, occurred_at, schema_version, received_at,
  room_id, window_start, window_end, pipeline_version, moderator_id,
  verdict_label, verdict_category, decided_label, decided_category, action_taken,
  audit, decision, reverses_event_id,
  dt, hour
FROM (
  SELECT *, row_number() OVER (PARTITION BY dt, hour, event_id ORDER BY received_at) AS copy_no
  FROM moderator_feedback
) AS copies
WHERE copy_no = 1
  AND coalesce(decision, '') <> 'undo'
  AND event_id NOT IN (
    SELECT reverses_event_id FROM moderator_feedback WHERE decision = 'undo' AND reverses_event_id IS NOT NULL
  )
