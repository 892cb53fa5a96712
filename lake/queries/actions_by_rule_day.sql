-- Protective actions per day, policy rule and mode: the forward actions written (dry run
-- included: what a rule would have done), the distinct accounts they were about (keyed
-- pseudonyms; accounts without a key are not counted), how many the actions queue
-- accepted, the reversals a moderator's overturn wrote (they keep their action's rule) and
-- the re-applications an undone overturn wrote, and protection latency: from the newest
-- message of the reviewed window to the queue's acceptance of the action, p50 and p95 in
-- seconds, over the published forward actions.
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  dt AS day,
  rule_id,
  mode,
  count_if(phase = 'written' AND reverses IS NULL) AS actions,
  count(DISTINCT CASE WHEN phase = 'written' AND reverses IS NULL THEN offender END) AS accounts,
  count_if(phase = 'published' AND reverses IS NULL) AS published,
  count_if(phase = 'written' AND action IN ('retract_notice', 'release_transaction', 'lift_restriction')) AS reversals,
  count_if(phase = 'written' AND reverses IS NOT NULL AND action NOT IN ('retract_notice', 'release_transaction', 'lift_restriction')) AS reapplied,
  approx_percentile(date_diff('millisecond', message_at, published_at) / 1000.0, 0.5)
    FILTER (WHERE phase = 'published' AND reverses IS NULL AND message_at IS NOT NULL) AS p50_protection_s,
  approx_percentile(date_diff('millisecond', message_at, published_at) / 1000.0, 0.95)
    FILTER (WHERE phase = 'published' AND reverses IS NULL AND message_at IS NOT NULL) AS p95_protection_s
FROM protective_action_dedup
WHERE dt BETWEEN ? AND ?
GROUP BY dt, rule_id, mode
ORDER BY day, rule_id, mode
