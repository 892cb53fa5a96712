-- Cost per 1,000 reviews per day: model calls, prompt tokens (and the share
-- the servers' prefix caches served), completion tokens and USD at the pool
-- prices the workers were configured with (llm.Price; 0 where a pool has no
-- price). A review is one (room, window, pipeline version); it counts on
-- the day of its first call, with every attempt it made, failed ones and
-- retries included: they were paid for.
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  day,
  count(*) AS reviews,
  sum(calls) AS calls,
  sum(prompt_tokens) AS prompt_tokens,
  sum(cached_tokens) AS cached_tokens,
  CAST(sum(cached_tokens) AS double) / nullif(sum(prompt_tokens), 0) AS cached_share,
  sum(completion_tokens) AS completion_tokens,
  sum(cost_primary_usd) AS cost_primary_usd,
  sum(cost_fallback_usd) AS cost_fallback_usd,
  sum(cost_usd) AS cost_usd,
  1000 * sum(cost_usd) / count(*) AS cost_per_1000_reviews_usd
FROM (
  SELECT
    room_id, window_start, window_end, pipeline_version,
    min(dt) AS day,
    count(*) AS calls,
    sum(tokens_in) AS prompt_tokens,
    sum(tokens_cached) AS cached_tokens,
    sum(tokens_out) AS completion_tokens,
    sum(CASE WHEN pool = 'primary' THEN cost_usd ELSE 0 END) AS cost_primary_usd,
    sum(CASE WHEN pool = 'fallback' THEN cost_usd ELSE 0 END) AS cost_fallback_usd,
    sum(cost_usd) AS cost_usd
  FROM inference_log_dedup
  WHERE dt BETWEEN ? AND ?
  GROUP BY room_id, window_start, window_end, pipeline_version
) AS reviews
GROUP BY day
ORDER BY day
