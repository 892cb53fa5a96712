-- +goose Up
-- The feedback outbox skips what SQS will never accept and backs off per
-- row from what it may. Without this the sweeper took the oldest unsent
-- rows in order, so ten decisions whose events SQS refuses (a room id with
-- characters SQS rejects) were taken first on every sweep and blocked all
-- newer feedback for good.
--
--   feedback_rejected_at      when SQS refused the event as the sender's
--                             fault; the row is never sent again (an
--                             operator clears it to resend: deploy/README.md,
--                             ChatguardConsoleFeedbackRejected)
--   feedback_reject_reason    SQS's answer (its code and message, no event
--                             content)
--   feedback_attempts         sends that failed transiently
--   feedback_next_attempt_at  the row is not taken again before this
--
-- The unsent index gains feedback_rejected_at before decided_at: the sweep
-- and the backlog read only unsent, unrejected rows, so rejected rows pile
-- up outside the range they walk.
ALTER TABLE moderator_decisions
    ADD COLUMN feedback_rejected_at DATETIME(6) NULL AFTER feedback_sent_at,
    ADD COLUMN feedback_reject_reason VARCHAR(500) NOT NULL DEFAULT '' AFTER feedback_rejected_at,
    ADD COLUMN feedback_attempts INT UNSIGNED NOT NULL DEFAULT 0 AFTER feedback_reject_reason,
    ADD COLUMN feedback_next_attempt_at DATETIME(6) NULL AFTER feedback_attempts,
    DROP KEY ix_moderator_decisions_feedback_unsent,
    ADD KEY ix_moderator_decisions_feedback_unsent (feedback_sent_at, feedback_rejected_at, decided_at);

-- +goose Down
ALTER TABLE moderator_decisions
    DROP KEY ix_moderator_decisions_feedback_unsent,
    ADD KEY ix_moderator_decisions_feedback_unsent (feedback_sent_at, decided_at),
    DROP COLUMN feedback_next_attempt_at,
    DROP COLUMN feedback_attempts,
    DROP COLUMN feedback_reject_reason,
    DROP COLUMN feedback_rejected_at;
