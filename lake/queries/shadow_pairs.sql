-- Shadow pairs: every shadow review in the day range with the live verdict's
-- label it carries, one row per event (the dedup view), for `worker eval shadow`,
-- which keeps the latest copy of an event id across partitions (a rerun of the
-- same live review by the same candidate writes the same id later) and prints
-- the paired comparison with the live path as the reference. Agreement is not
-- accuracy: the live verdict is the reference, not a moderator's decision.
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  event_id,
  occurred_at,
  received_at,
  room_id,
  window_start,
  window_end,
  pipeline_version,
  candidate,
  candidate_model,
  candidate_pipeline_version,
  outcome,
  error_kind,
  live_label,
  live_category,
  label,
  category,
  text_differs,
  latency_ms,
  cost_usd
FROM shadow_verdict_dedup
WHERE dt BETWEEN ? AND ?
ORDER BY room_id, window_start, window_end, pipeline_version, candidate, occurred_at, received_at
