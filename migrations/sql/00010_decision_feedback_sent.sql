-- +goose Up
-- The moderator_decisions row is the outbox of its moderator_feedback lake
-- event, so that no decision is lost to an SQS outage: the console writes the row, sends the event to the
-- feedback queue, and sets feedback_sent_at once SQS has accepted it. A row
-- whose feedback_sent_at stays NULL past a grace period is resent by the
-- console's sweeper with the same event id (derived from the row id), so the
-- lake's moderator_feedback_dedup view collapses any second copy.
--
-- Rows decided before this migration have NULL too and are resent once:
-- whether their event reached SQS was not recorded, and a duplicate is
-- harmless while a lost event is not.
--
-- The index serves the sweep (feedback_sent_at IS NULL AND decided_at < ?
-- ORDER BY decided_at LIMIT n FOR UPDATE SKIP LOCKED: walked in order with
-- no sort, it locks only the rows it takes, so two consoles take distinct
-- rows) and the backlog gauge (COUNT, MIN(decided_at) of the NULL rows):
-- both read only the unsent end of the index.
ALTER TABLE moderator_decisions
    ADD COLUMN feedback_sent_at DATETIME(6) NULL AFTER decided_at,
    ADD KEY ix_moderator_decisions_feedback_unsent (feedback_sent_at, decided_at);

-- +goose Down
ALTER TABLE moderator_decisions
    DROP KEY ix_moderator_decisions_feedback_unsent,
    DROP COLUMN feedback_sent_at;
