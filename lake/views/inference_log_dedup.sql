-- inference_log_dedup is inference_log with each event once. The consumer writes at least
-- once: a crash between writing an object and deleting its messages writes
-- those events again in a later object. Copies of an event share its
-- occurred_at and so its partition, which is why dt and hour lead the window
-- partition: a filter on dt or hour then still prunes partitions through the
-- view. The earliest received copy is kept. Trino and DuckDB both accept it.
CREATE OR REPLACE VIEW inference_log_dedup AS
SELECT
  event_id, event_type, occurred_at, schema_version, received_at,
  room_id, window_start, window_end, pipeline_version, run_id,
  stage, pool, model, attempt, outcome,
  error_kind, ttft_ms, latency_ms, tokens_in, tokens_out,
  coalesce(tokens_cached, 0) AS tokens_cached, coalesce(cost_usd, 0) AS cost_usd,
  prompt_sha256, prompt_chars, messages, images, output,
  dt, hour
FROM (
  SELECT *, row_number() OVER (PARTITION BY dt, hour, event_id ORDER BY received_at) AS copy_no
  FROM inference_log
) AS copies
WHERE copy_no = 1
