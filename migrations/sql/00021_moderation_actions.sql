-- +goose Up
-- The moderation side's audit record: one row per console action (take,
-- release, an override of someone's take or decision, a decision, a bulk
-- decision, taking or releasing a whole campaign, a room stop), written
-- BEFORE the action acts; the console refuses the action when the row
-- cannot be written. Append-only, as stop_signals is: the triggers below
-- make the database refuse UPDATE and DELETE.
--
--   requested_at  when the moderator asked, UTC
--   moderator     the console's pseudonymous moderator id (never an e-mail)
--   action        take|release|override_take|override_decided|decide|
--                 bulk_decide|take_campaign|release_campaign|stop
--   verdict_id    the item (NULL for a campaign-wide action); no foreign
--                 key, so the record outlives a purged verdict
--   room_id       the item's room ('' for a campaign-wide action)
--   mark          the campaign of a campaign action ('' otherwise)
--   decision, label, category  what a decide or bulk_decide asked for
--   override      the moderator asked to act over someone else's take or
--                 decision
--   holder        the moderator an override acted over (the take's holder,
--                 or the one who decided meanwhile)
--   decision_id   the decision an override_decided acted over
--   rooms         the rooms a campaign action concerned
--   detail        a short note in a fixed vocabulary (never chat text)
--
-- The effect of an action is in its own table (moderator_decisions,
-- queue_takes, stop_signals); a row here whose action was then refused
-- (a take someone else held) has no effect there.
CREATE TABLE IF NOT EXISTS moderation_actions (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    requested_at  DATETIME(6)     NOT NULL,
    moderator     VARCHAR(128)    NOT NULL,
    action        VARCHAR(32)     NOT NULL,
    verdict_id    BIGINT UNSIGNED NULL,
    room_id       VARCHAR(128)    NOT NULL DEFAULT '',
    mark          VARCHAR(40)     NOT NULL DEFAULT '',
    decision      VARCHAR(16)     NOT NULL DEFAULT '',
    label         VARCHAR(16)     NOT NULL DEFAULT '',
    category      VARCHAR(32)     NOT NULL DEFAULT '',
    override      BOOLEAN         NOT NULL DEFAULT FALSE,
    holder        VARCHAR(128)    NOT NULL DEFAULT '',
    decision_id   BIGINT UNSIGNED NULL,
    rooms         INT             NOT NULL DEFAULT 0,
    detail        VARCHAR(500)    NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    KEY ix_moderation_actions_requested (requested_at),
    KEY ix_moderation_actions_moderator (moderator, requested_at),
    KEY ix_moderation_actions_verdict (verdict_id, requested_at),
    CONSTRAINT ck_moderation_actions_action CHECK (action IN ('take', 'release', 'override_take', 'override_decided',
        'decide', 'bulk_decide', 'take_campaign', 'release_campaign', 'stop'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose StatementBegin
CREATE TRIGGER moderation_actions_no_update BEFORE UPDATE ON moderation_actions FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'moderation_actions is append-only';
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER moderation_actions_no_delete BEFORE DELETE ON moderation_actions FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'moderation_actions is append-only';
-- +goose StatementEnd

-- A stop the console publishes through the operator API names the
-- moderator who pressed it ('' for a stop an operator sent). The update
-- trigger is recreated so that moderator, like every column but the
-- outcome's, cannot change.
ALTER TABLE stop_signals ADD COLUMN moderator VARCHAR(128) NOT NULL DEFAULT '' AFTER identity;

DROP TRIGGER IF EXISTS stop_signals_no_update;

-- +goose StatementBegin
CREATE TRIGGER stop_signals_no_update BEFORE UPDATE ON stop_signals FOR EACH ROW
BEGIN
    IF NOT (OLD.outcome = 'pending' AND NEW.outcome <> 'pending' AND NEW.finished_at IS NOT NULL
            AND NEW.id <=> OLD.id
            AND NEW.requested_at <=> OLD.requested_at
            AND BINARY NEW.identity <=> BINARY OLD.identity
            AND BINARY NEW.moderator <=> BINARY OLD.moderator
            AND BINARY NEW.remote_addr <=> BINARY OLD.remote_addr
            AND BINARY NEW.scope <=> BINARY OLD.scope
            AND BINARY NEW.room_id <=> BINARY OLD.room_id
            AND BINARY NEW.run_id <=> BINARY OLD.run_id
            AND NEW.window_start <=> OLD.window_start
            AND NEW.window_end <=> OLD.window_end
            AND NEW.ttl_seconds <=> OLD.ttl_seconds
            AND BINARY NEW.reason <=> BINARY OLD.reason) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'stop_signals is append-only: only a pending row''s outcome may be recorded, once';
    END IF;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS stop_signals_no_update;

-- +goose StatementBegin
CREATE TRIGGER stop_signals_no_update BEFORE UPDATE ON stop_signals FOR EACH ROW
BEGIN
    IF NOT (OLD.outcome = 'pending' AND NEW.outcome <> 'pending' AND NEW.finished_at IS NOT NULL
            AND NEW.id <=> OLD.id
            AND NEW.requested_at <=> OLD.requested_at
            AND BINARY NEW.identity <=> BINARY OLD.identity
            AND BINARY NEW.remote_addr <=> BINARY OLD.remote_addr
            AND BINARY NEW.scope <=> BINARY OLD.scope
            AND BINARY NEW.room_id <=> BINARY OLD.room_id
            AND BINARY NEW.run_id <=> BINARY OLD.run_id
            AND NEW.window_start <=> OLD.window_start
            AND NEW.window_end <=> OLD.window_end
            AND NEW.ttl_seconds <=> OLD.ttl_seconds
            AND BINARY NEW.reason <=> BINARY OLD.reason) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'stop_signals is append-only: only a pending row''s outcome may be recorded, once';
    END IF;
END;
-- +goose StatementEnd

ALTER TABLE stop_signals DROP COLUMN moderator;

DROP TRIGGER IF EXISTS moderation_actions_no_delete;
DROP TRIGGER IF EXISTS moderation_actions_no_update;
DROP TABLE IF EXISTS moderation_actions;
