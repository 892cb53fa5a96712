-- +goose Up
-- Who a verdict is about: one row per subject (a sender id with the judge's
-- offender role whose messages are the verdict's evidence), written in the
-- verdict's save transaction. Verdicts saved before this table have no rows:
-- "no subjects" on an old verdict means "not recorded", not "no one".
--
-- The account history asks "in which rooms, with which label and category,
-- was this sender a subject in the last 30 days"; room_id, label, category
-- and decided_at are copied from the verdict so that query reads only
-- ix_verdict_subjects_sender (a range on sender_id, decided_at) and never the
-- verdicts table. verdict_id first in the primary key keeps a verdict's rows
-- together for the replace on a re-save; the cascade removes them with the
-- verdict (retention), and `worker purge --erase-sender` by sender.
CREATE TABLE IF NOT EXISTS verdict_subjects (
    verdict_id  BIGINT UNSIGNED NOT NULL,
    sender_id   VARCHAR(128)    NOT NULL,
    role        VARCHAR(16)     NOT NULL,
    room_id     VARCHAR(128)    NOT NULL,
    label       VARCHAR(16)     NOT NULL,
    category    VARCHAR(32)     NOT NULL,
    decided_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (verdict_id, sender_id),
    KEY ix_verdict_subjects_sender (sender_id, decided_at, room_id, label, category),
    CONSTRAINT fk_verdict_subjects_verdict FOREIGN KEY (verdict_id) REFERENCES verdicts (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS verdict_subjects;
