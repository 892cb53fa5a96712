-- +goose Up
-- Decisions that mean what they say: a moderator may undo their own
-- decision in force (within the console's --undo-window) by a reversing
-- row of its own, never by a delete or an edit of what was decided.
--
--   decision     gains 'undo'
--   reverses_id  on an undo, the decision it reverses (NULL otherwise);
--                unique, so one decision is undone at most once
--   reversed_at  on a decision an undo reversed, the undo's time (NULL
--                while it stands): the queue, the campaign takes and the
--                account pages read the decision in force as the newest
--                row that is neither an undo nor reversed
--
-- An undo carries the label and category of the decision it reverses and
-- owes no moderator_feedback event: its feedback_sent_at is its own
-- decided_at, so the outbox never takes it.
ALTER TABLE moderator_decisions
    ADD COLUMN reverses_id BIGINT UNSIGNED NULL AFTER decision,
    ADD COLUMN reversed_at DATETIME(6) NULL AFTER reverses_id,
    ADD UNIQUE KEY ux_moderator_decisions_reverses (reverses_id);

ALTER TABLE moderator_decisions DROP CONSTRAINT ck_moderator_decisions_decision;

ALTER TABLE moderator_decisions
    ADD CONSTRAINT ck_moderator_decisions_decision CHECK (decision IN ('confirm', 'overturn', 'undo')),
    ADD CONSTRAINT ck_moderator_decisions_reverses CHECK ((decision = 'undo') = (reverses_id IS NOT NULL));

-- +goose Down
-- An undo cannot be kept under the old constraint: the rows are dropped
-- and the decisions they reversed stand again.
DELETE FROM moderator_decisions WHERE decision = 'undo';

ALTER TABLE moderator_decisions DROP CONSTRAINT ck_moderator_decisions_reverses;

ALTER TABLE moderator_decisions DROP CONSTRAINT ck_moderator_decisions_decision;

ALTER TABLE moderator_decisions
    ADD CONSTRAINT ck_moderator_decisions_decision CHECK (decision IN ('confirm', 'overturn')),
    DROP KEY ux_moderator_decisions_reverses,
    DROP COLUMN reversed_at,
    DROP COLUMN reverses_id;
