-- Precision of the pipeline's flags as moderators judged them, per category
-- and ISO week: of the flagged verdicts (label abusive or suspicious) that a
-- moderator decided on, the share the moderator kept flagged, and the share
-- kept with the same category. `worker eval --moderator-feedback` prints the
-- same figures from exported events.
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  CAST(date_trunc('week', occurred_at) AS date) AS week_start,
  verdict_category AS category,
  count(*) AS decisions,
  sum(CASE WHEN decided_label <> 'clean' THEN 1 ELSE 0 END) AS kept_flagged,
  avg(CASE WHEN decided_label <> 'clean' THEN 1.0 ELSE 0.0 END) AS flag_precision,
  avg(CASE WHEN decided_label <> 'clean' AND decided_category = verdict_category THEN 1.0 ELSE 0.0 END) AS category_precision
FROM moderator_feedback_dedup
WHERE dt BETWEEN ? AND ?
  AND verdict_label IN ('abusive', 'suspicious')
GROUP BY 1, 2
ORDER BY 1, 2
