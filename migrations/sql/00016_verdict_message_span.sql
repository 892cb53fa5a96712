-- +goose Up
-- The sent_at of the oldest and the newest chat message of the window a
-- verdict was reviewed on, so that each verdict's freshness (finished_at
-- minus newest_message_at: how long after the window's last message the
-- verdict existed) can be shown and queried. Nullable: verdicts saved
-- before this migration, and verdicts that never read the chat (expired,
-- stopped before the history, a window with no message), have none, and
-- their freshness is unknown. No index: the columns are read with their
-- row, never searched.
ALTER TABLE verdicts
    ADD COLUMN oldest_message_at DATETIME(6) NULL,
    ADD COLUMN newest_message_at DATETIME(6) NULL;

-- +goose Down
ALTER TABLE verdicts
    DROP COLUMN newest_message_at,
    DROP COLUMN oldest_message_at;
