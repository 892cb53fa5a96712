-- Shadow agreement per day and candidate: how many live reviews the candidate
-- shadowed, how many it answered, the share of answers that kept the live
-- label (and label and category), the share that saw other text than the live
-- path (pseudonymised), and its mean latency and cost per answer. Agreement is
-- not accuracy: the live verdict is the reference, not a moderator's decision.
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  dt AS day,
  candidate,
  count(*) AS shadowed,
  count_if(outcome = 'ok') AS answered,
  avg(CASE WHEN outcome = 'ok' THEN (CASE WHEN label = live_label THEN 1.0 ELSE 0.0 END) END) AS label_agreement,
  avg(CASE WHEN outcome = 'ok' THEN (CASE WHEN label = live_label AND category = live_category THEN 1.0 ELSE 0.0 END) END) AS label_category_agreement,
  avg(CASE WHEN text_differs THEN 1.0 ELSE 0.0 END) AS text_differs_share,
  avg(CASE WHEN outcome = 'ok' THEN latency_ms END) AS mean_latency_ms,
  avg(CASE WHEN outcome = 'ok' THEN cost_usd END) AS mean_cost_usd
FROM shadow_verdict_dedup
WHERE dt BETWEEN ? AND ?
GROUP BY dt, candidate
ORDER BY day, candidate
