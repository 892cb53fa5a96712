-- +goose Up
-- Every account that took part in a reviewed room (a buyer or seller
-- sender id among the messages reviewed), one row per verdict and account,
-- written in the verdict's save transaction: the console's account view
-- lists every room an account took part in, not only those whose verdict
-- names it as a subject (verdict_subjects). A verdict's subjects are
-- always among its participants, so the view reads this table alone and
-- marks the subjects by a primary-key probe of verdict_subjects.
--
-- room_id and decided_at are copied from the verdict (as verdict_subjects
-- does) so that an account's page is a range of
-- ix_verdict_participants_sender in keyset order. The cascade removes the
-- rows with their verdict (retention), `worker purge --erase-sender` by
-- sender. Verdicts saved before this table have no participant rows; their
-- subjects are copied in below, so the view still lists every verdict it
-- listed before.
CREATE TABLE IF NOT EXISTS verdict_participants (
    verdict_id  BIGINT UNSIGNED NOT NULL,
    sender_id   VARCHAR(128)    NOT NULL,
    role        VARCHAR(16)     NOT NULL,
    room_id     VARCHAR(128)    NOT NULL,
    decided_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (verdict_id, sender_id),
    KEY ix_verdict_participants_sender (sender_id, decided_at),
    CONSTRAINT fk_verdict_participants_verdict FOREIGN KEY (verdict_id) REFERENCES verdicts (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO verdict_participants (verdict_id, sender_id, role, room_id, decided_at)
    SELECT verdict_id, sender_id, role, room_id, decided_at FROM verdict_subjects;

-- +goose Down
DROP TABLE IF EXISTS verdict_participants;
