-- Campaigns by size and category per ISO week, with the moderators' word on
-- them: per campaign mark (a keyed pseudonym of a shared script or contact,
-- never its text) and verdict category, the distinct rooms whose done
-- verdicts carried the mark, the most senders the fleet had counted for it,
-- the rooms judged abusive, the rooms a moderator decided, and the decided
-- rooms whose newest decision changed the label (overturned). A room counts
-- once however many of its windows carried the mark. The campaigns column is
-- a JSON array of objects without nested objects; each object is taken
-- apart with regexp_extract_all so the same text runs on Trino and DuckDB.
-- Verdicts from before campaign signals have none and count nowhere.
-- Decisions are read from every day: one may come days after its verdict.
-- Parameters: first day and last day of the verdicts, inclusive, as 'YYYY-MM-DD' literals.
SELECT
  week_start,
  kind,
  mark,
  category,
  count(DISTINCT room_id) AS rooms,
  max(senders) AS max_senders,
  count(DISTINCT CASE WHEN label = 'abusive' THEN room_id END) AS abusive_rooms,
  count(DISTINCT CASE WHEN decided_label IS NOT NULL THEN room_id END) AS decided_rooms,
  count(DISTINCT CASE WHEN decided_label <> label THEN room_id END) AS overturned_rooms
FROM (
  SELECT
    CAST(date_trunc('week', v.occurred_at) AS date) AS week_start,
    json_extract_scalar(c.item, '$.kind') AS kind,
    json_extract_scalar(c.item, '$.mark') AS mark,
    CAST(json_extract_scalar(c.item, '$.senders') AS integer) AS senders,
    v.category,
    v.label,
    v.room_id,
    d.decided_label
  FROM verdict_dedup AS v
  CROSS JOIN UNNEST(regexp_extract_all(v.campaigns, '\{[^{}]*\}')) AS c (item)
  LEFT JOIN (
    SELECT
      room_id, window_start, window_end, pipeline_version, decided_label,
      row_number() OVER (PARTITION BY room_id, window_start, window_end, pipeline_version ORDER BY occurred_at DESC, event_id DESC) AS newest
    FROM moderator_feedback_dedup
  ) AS d
    ON d.room_id = v.room_id AND d.window_start = v.window_start AND d.window_end = v.window_end
    AND d.pipeline_version = v.pipeline_version AND d.newest = 1
  WHERE v.dt BETWEEN ? AND ?
    AND v.status = 'done' AND v.campaigns IS NOT NULL
) AS marked
GROUP BY week_start, kind, mark, category
ORDER BY week_start, rooms DESC, mark, category
