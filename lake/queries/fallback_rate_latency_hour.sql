-- Per hour and stage: model calls, the share answered by the fallback pool,
-- and the p50 and p95 latency of successful calls. One inference_log row is
-- one stage attempt.
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  date_trunc('hour', occurred_at) AS hour_start,
  stage,
  count(*) AS calls,
  avg(CASE WHEN pool = 'fallback' THEN 1.0 ELSE 0.0 END) AS fallback_rate,
  avg(CASE WHEN outcome = 'ok' THEN 0.0 ELSE 1.0 END) AS failure_rate,
  approx_percentile(latency_ms, 0.5) FILTER (WHERE outcome = 'ok') AS p50_latency_ms,
  approx_percentile(latency_ms, 0.95) FILTER (WHERE outcome = 'ok') AS p95_latency_ms
FROM inference_log_dedup
WHERE dt BETWEEN ? AND ?
GROUP BY 1, 2
ORDER BY 1, 2
