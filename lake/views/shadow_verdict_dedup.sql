-- shadow_verdict_dedup is shadow_verdict with each event once: one row per live
-- review and candidate. The consumer writes at least once, and copies of an
-- event share its occurred_at and so its partition, which is why dt and hour
-- lead the window partition (a filter on dt or hour still prunes through the
-- view). The earliest received copy is kept. Trino and DuckDB both accept it.
CREATE OR REPLACE VIEW shadow_verdict_dedup AS
SELECT
  event_id, event_type, occurred_at, schema_version, received_at,
  room_id, window_start, window_end, pipeline_version, run_id,
  candidate, candidate_model, candidate_pipeline_version, outcome, error_kind,
  live_label, live_category, label, category, severity, confidence,
  action, early_exit, text_differs, latency_ms, cost_usd,
  triage_tokens_in, triage_tokens_out, triage_latency_ms,
  extract_tokens_in, extract_tokens_out, extract_latency_ms,
  vision_tokens_in, vision_tokens_out, vision_latency_ms,
  judge_tokens_in, judge_tokens_out, judge_latency_ms,
  dt, hour
FROM (
  SELECT *, row_number() OVER (PARTITION BY dt, hour, event_id ORDER BY received_at) AS copy_no
  FROM shadow_verdict
) AS copies
WHERE copy_no = 1
