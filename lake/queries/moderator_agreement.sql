-- Moderator agreement per day and pipeline label: the share of moderator
-- decisions that kept the pipeline's label, and that kept both label and
-- category. Low agreement on "abusive" means false positives; on "clean"
-- (when moderators review clean rooms) missed abuse.
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  dt AS day,
  verdict_label,
  count(*) AS decisions,
  avg(CASE WHEN decided_label = verdict_label THEN 1.0 ELSE 0.0 END) AS label_agreement,
  avg(CASE WHEN decided_label = verdict_label AND decided_category = verdict_category THEN 1.0 ELSE 0.0 END) AS label_category_agreement
FROM moderator_feedback_dedup
WHERE dt BETWEEN ? AND ?
GROUP BY dt, verdict_label
ORDER BY day, verdict_label
