-- +goose Up
-- Take history: when moderators started and ended their takes of queue
-- items. queue_takes holds only the current holder and loses its row when
-- the item is released or decided, so pick-up time (the item's verdict
-- finished to its first take) and handle time (a moderator's take to
-- their decision) could not be computed from it. One row per event,
-- append-only, written by the console after the take changed:
--
--   at          when, UTC
--   verdict_id  the item; no foreign key, so the history outlives a
--               purged verdict until its own retention ends
--   moderator   the console's pseudonymous moderator id
--   event       'take' (the moderator became the holder) or 'release'
--               (they let it go without deciding)
--
-- A decision ends a take too: it is in moderator_decisions. `worker purge`
-- deletes rows older than --take-history-retention.
CREATE TABLE IF NOT EXISTS take_history (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    at          DATETIME(6)     NOT NULL,
    verdict_id  BIGINT UNSIGNED NOT NULL,
    moderator   VARCHAR(128)    NOT NULL,
    event       VARCHAR(16)     NOT NULL,
    PRIMARY KEY (id),
    KEY ix_take_history_verdict (verdict_id, at),
    KEY ix_take_history_at (at),
    CONSTRAINT ck_take_history_event CHECK (event IN ('take', 'release'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A moderator revealing one masked contact value is a console action of
-- its own, audited before the value is shown.
ALTER TABLE moderation_actions DROP CONSTRAINT ck_moderation_actions_action;
ALTER TABLE moderation_actions ADD CONSTRAINT ck_moderation_actions_action CHECK (action IN ('take', 'release', 'override_take',
    'override_decided', 'decide', 'bulk_decide', 'take_campaign', 'release_campaign', 'stop', 'reveal'));

-- +goose Down
ALTER TABLE moderation_actions DROP CONSTRAINT ck_moderation_actions_action;
ALTER TABLE moderation_actions ADD CONSTRAINT ck_moderation_actions_action CHECK (action IN ('take', 'release', 'override_take',
    'override_decided', 'decide', 'bulk_decide', 'take_campaign', 'release_campaign', 'stop'));
DROP TABLE IF EXISTS take_history;
