-- Rooms with at least one message in a half-open window [start, end).
-- Written in the SQL that both Athena (Trino) and DuckDB accept. Values come
-- only as execution parameters, positional, in this order:
--   1, 2  first and last dt partition of the window      ('YYYY-MM-DD')
--   3, 4  first dt and its first hour partition          ('HH')
--   5, 6  last dt and its last hour partition
--   7, 8  window start and end                           (TIMESTAMP literals)
-- The dt/hour predicates only reference partition columns so that Athena
-- prunes partitions; the sent_at bounds make the window exact.
SELECT
    room_id,
    min(sent_at)            AS first_message_at,
    max(sent_at)            AS last_message_at,
    count(*)                AS message_count,
    bool_or(kind = 'image') AS has_images
FROM chat_messages
WHERE dt BETWEEN ? AND ?
  AND (dt <> ? OR hour >= ?)
  AND (dt <> ? OR hour <= ?)
  AND sent_at >= ?
  AND sent_at < ?
GROUP BY room_id
ORDER BY room_id
