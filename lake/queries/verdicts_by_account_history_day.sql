-- Verdicts by the account history their review was shown, per day (UTC day of
-- occurred_at), counting each verdict event once and only finished reviews:
-- history is the lookup's status (ok, timeout, error; none when the history
-- was off, the window had no message, or the verdict predates the column) and
-- history_shown whether the stages saw at least one line of earlier rooms.
-- Compare the label mix with and without history to see what it changes.
-- Parameters: first day and last day, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  dt AS day,
  coalesce(json_extract_scalar(account_history, '$.status'), 'none') AS history,
  json_extract_scalar(account_history, '$.lines[0].role') IS NOT NULL AS history_shown,
  label,
  count(*) AS verdicts,
  count(DISTINCT room_id) AS rooms
FROM verdict_dedup
WHERE dt BETWEEN ? AND ?
  AND status = 'done'
GROUP BY dt, coalesce(json_extract_scalar(account_history, '$.status'), 'none'),
  json_extract_scalar(account_history, '$.lines[0].role') IS NOT NULL, label
ORDER BY day, history, history_shown, label
