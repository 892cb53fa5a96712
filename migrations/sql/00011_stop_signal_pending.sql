-- +goose Up
-- An operator stop is audited before it acts: the worker appends the row as
-- 'pending' (and refuses the stop with 503 when it cannot), publishes the
-- signal, then records the outcome on that row. A crash between the publish
-- and the outcome leaves a pending row: the trail says a stop was asked for
-- and may have taken effect, never nothing.
--
--   finished_at  when the outcome was recorded (NULL while pending; for
--                rows that never acted — refused, invalid — it equals
--                requested_at)
--
-- The table stays append-only: the update trigger now allows exactly one
-- change, a pending row's outcome, status, detail and finished_at; every
-- other column, and every row already decided, is refused as before.
DROP TRIGGER IF EXISTS stop_signals_no_update;

ALTER TABLE stop_signals ADD COLUMN finished_at DATETIME(6) NULL AFTER requested_at;

-- Rows written before this migration were written once, finished.
UPDATE stop_signals SET finished_at = requested_at WHERE finished_at IS NULL;

ALTER TABLE stop_signals DROP CONSTRAINT ck_stop_signals_outcome;

ALTER TABLE stop_signals ADD CONSTRAINT ck_stop_signals_outcome
    CHECK (outcome IN ('pending', 'accepted', 'refused', 'invalid', 'failed'));

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

-- +goose Down
DROP TRIGGER IF EXISTS stop_signals_no_update;

-- A pending row's outcome is unknown; the old schema has no word for it.
UPDATE stop_signals SET outcome = 'failed', detail = 'outcome not recorded (pending when migrated down)' WHERE outcome = 'pending';

ALTER TABLE stop_signals DROP CONSTRAINT ck_stop_signals_outcome;

ALTER TABLE stop_signals ADD CONSTRAINT ck_stop_signals_outcome
    CHECK (outcome IN ('accepted', 'refused', 'invalid', 'failed'));

ALTER TABLE stop_signals DROP COLUMN finished_at;

-- +goose StatementBegin
CREATE TRIGGER stop_signals_no_update BEFORE UPDATE ON stop_signals FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'stop_signals is append-only';
-- +goose StatementEnd
