-- Top accounts by abusive rooms per ISO week: per week, the 100 accounts (keyed
-- pseudonyms, hmac:..., never sender ids) that done verdicts labelled abusive
-- were about in the most distinct rooms; a room counts once however many of its
-- windows were reviewed. Rooms whose verdict the newest moderator decision
-- relabelled count apart, as overturned, and not as abusive. Verdicts from
-- before subjects existed have none and count nowhere; pseudonyms join only
-- under one key (docs/operations.md, key rotation). Decisions are read from
-- every day: one may come days after its verdict.
-- Parameters: first day and last day of the verdicts, inclusive, as 'YYYY-MM-DD' literals.
SELECT week_start, subject, abusive_rooms, overturned_rooms
FROM (
  SELECT
    week_start,
    subject,
    count(DISTINCT CASE WHEN NOT overturned THEN room_id END) AS abusive_rooms,
    count(DISTINCT CASE WHEN overturned THEN room_id END) AS overturned_rooms,
    row_number() OVER (PARTITION BY week_start ORDER BY count(DISTINCT CASE WHEN NOT overturned THEN room_id END) DESC, subject) AS rank_in_week
  FROM (
    SELECT
      CAST(date_trunc('week', v.occurred_at) AS date) AS week_start,
      trim(s.subject) AS subject,
      v.room_id,
      coalesce(d.decided_label <> v.label, false) AS overturned
    FROM verdict_dedup AS v
    CROSS JOIN UNNEST(split(v.subjects, ',')) AS s (subject)
    LEFT JOIN (
      SELECT
        room_id, window_start, window_end, pipeline_version, decided_label,
        row_number() OVER (PARTITION BY room_id, window_start, window_end, pipeline_version ORDER BY occurred_at DESC, event_id DESC) AS newest
      FROM moderator_feedback_dedup
    ) AS d
      ON d.room_id = v.room_id AND d.window_start = v.window_start AND d.window_end = v.window_end
      AND d.pipeline_version = v.pipeline_version AND d.newest = 1
    WHERE v.dt BETWEEN ? AND ?
      AND v.status = 'done' AND v.label = 'abusive' AND v.subjects <> ''
  ) AS a
  GROUP BY week_start, subject
) AS ranked
WHERE rank_in_week <= 100
ORDER BY week_start, abusive_rooms DESC, subject
