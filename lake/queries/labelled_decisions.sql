-- Labelled decisions: per reviewed window, the latest moderator decision in
-- force that day range holds (a later decision on the same verdict overrides
-- an earlier one; an undone one is out, through the dedup view), joined to the done verdict it was made on. `worker eval build-set`
-- reads it to build a frozen labelled set; decisions on the console's audit
-- items (clean verdicts sampled at random, audit true) make the clean stratum,
-- kept clean or overturned (a missed positive); decisions of clean on flagged
-- verdicts the hard negatives. audit is the latest decision's (false for
-- files older than the column). The verdict side is not filtered by day: a
-- decision may come days after its verdict.
-- subjects and campaigns are the verdict's (keyed pseudonyms only): build-set
-- takes the case's account and campaign cluster keys from them.
-- Parameters: first day and last day of the decisions, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  d.room_id,
  d.window_start,
  d.window_end,
  d.pipeline_version,
  v.label AS verdict_label,
  v.category AS verdict_category,
  d.decided_label,
  d.decided_category,
  d.occurred_at AS decided_at,
  d.decisions,
  d.audit,
  v.subjects,
  v.campaigns
FROM (
  SELECT
    room_id, window_start, window_end, pipeline_version, decided_label, decided_category, occurred_at,
    coalesce(audit, false) AS audit,
    row_number() OVER (PARTITION BY room_id, window_start, window_end, pipeline_version ORDER BY occurred_at DESC, event_id DESC) AS newest,
    count(*) OVER (PARTITION BY room_id, window_start, window_end, pipeline_version) AS decisions
  FROM moderator_feedback_dedup
  WHERE dt BETWEEN ? AND ?
) AS d
JOIN (
  SELECT room_id, window_start, window_end, pipeline_version, min(label) AS label, min(category) AS category,
    min(subjects) AS subjects, min(campaigns) AS campaigns
  FROM verdict_dedup
  WHERE status = 'done'
  GROUP BY room_id, window_start, window_end, pipeline_version
) AS v
  ON v.room_id = d.room_id AND v.window_start = d.window_start AND v.window_end = d.window_end
  AND v.pipeline_version = d.pipeline_version
WHERE d.newest = 1
ORDER BY d.room_id, d.window_start, d.window_end, d.pipeline_version
