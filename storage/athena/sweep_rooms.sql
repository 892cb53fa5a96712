-- The rooms query of the batch in sweep mode: rooms.sql plus, per room, the
-- seconds of the window in which it had messages, so that the sweep publishes
-- only the uncovered parts of the hour that hold messages. At most one hour:
-- 3,600 values per room. Written in the SQL that both Athena (Trino) and
-- DuckDB accept (both count date_diff in whole seconds from a window start on
-- a whole second, and render the array as "[5, 600]"). Values come only as
-- execution parameters, positional, in this order:
--   1     window start                                  (TIMESTAMP literal)
--   2, 3  first and last dt partition of the window      ('YYYY-MM-DD')
--   4, 5  first dt and its first hour partition          ('HH')
--   6, 7  last dt and its last hour partition
--   8, 9  window start and end                           (TIMESTAMP literals)
SELECT
    room_id,
    min(sent_at)            AS first_message_at,
    max(sent_at)            AS last_message_at,
    count(*)                AS message_count,
    bool_or(kind = 'image') AS has_images,
    array_sort(array_agg(DISTINCT date_diff('second', ?, sent_at))) AS active_seconds
FROM chat_messages
WHERE dt BETWEEN ? AND ?
  AND (dt <> ? OR hour >= ?)
  AND (dt <> ? OR hour <= ?)
  AND sent_at >= ?
  AND sent_at < ?
GROUP BY room_id
ORDER BY room_id
