-- +goose Up
-- Who is working on which queue item, so that a team splits one queue
-- without two moderators deciding the same verdict at once. One row per
-- taken verdict; the console changes a row only with conditional
-- statements (take: insert, or update where the row is the taker's own or
-- gone stale; release: delete where the row is the taker's), so any
-- number of console replicas agree on one holder without locks held
-- across requests.
--
--   verdict_id  the verdicts row taken
--   moderator   who took it (the console's pseudonymous id, never an e-mail)
--   taken_at    when this moderator took it, UTC
--   active_at   the taker's last action on it (take, room page, decide),
--               UTC; a take older than the console's --take-timeout is
--               stale: shown as free, and the next take overwrites it
--
-- A decision releases the take (deletes the row). The foreign key cascades:
-- a purged verdict takes its stale take with it.
CREATE TABLE IF NOT EXISTS queue_takes (
    verdict_id  BIGINT UNSIGNED NOT NULL,
    moderator   VARCHAR(128)    NOT NULL,
    taken_at    DATETIME(6)     NOT NULL,
    active_at   DATETIME(6)     NOT NULL,
    PRIMARY KEY (verdict_id),
    KEY ix_queue_takes_moderator (moderator, active_at),
    CONSTRAINT fk_queue_takes_verdict FOREIGN KEY (verdict_id) REFERENCES verdicts (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS queue_takes;
