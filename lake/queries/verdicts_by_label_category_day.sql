-- Verdicts by label and category per day (UTC day of occurred_at), counting
-- each verdict event once and only reviews that finished (status done).
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  dt AS day,
  label,
  category,
  count(*) AS verdicts,
  count(DISTINCT room_id) AS rooms,
  avg(confidence) AS avg_confidence
FROM verdict_dedup
WHERE dt BETWEEN ? AND ?
  AND status = 'done'
GROUP BY dt, label, category
ORDER BY day, verdicts DESC, label, category
