-- +goose Up
-- The audit trail of operator stops: one row per POST /v1/stop
-- (and so per `worker stop`), accepted or refused. Append-only: the
-- triggers below make the database itself refuse UPDATE and DELETE, so a
-- compromised worker or a careless purge cannot rewrite who stopped what.
--
--   requested_at  when the request arrived, UTC
--   identity      the name of the bearer token that authenticated it
--                 ('' when none did)
--   remote_addr   the peer address of the request
--   outcome       accepted (published), refused (no or a wrong token),
--                 invalid (authenticated, bad body), failed (Redis failed)
--   http_status   what the caller was answered
--   scope         review|room|run ('' when the body did not say)
--   room_id, run_id, window_start, window_end  the stop's target
--   ttl_seconds   how long the stop lasts (0 when not accepted)
--   reason        the operator's reason, contact details masked
--   detail        why it was refused or failed
CREATE TABLE IF NOT EXISTS stop_signals (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    requested_at  DATETIME(6)     NOT NULL,
    identity      VARCHAR(128)    NOT NULL,
    remote_addr   VARCHAR(64)     NOT NULL,
    outcome       VARCHAR(16)     NOT NULL,
    http_status   SMALLINT        NOT NULL,
    scope         VARCHAR(16)     NOT NULL DEFAULT '',
    room_id       VARCHAR(128)    NOT NULL DEFAULT '',
    run_id        VARCHAR(128)    NOT NULL DEFAULT '',
    window_start  DATETIME(6)     NULL,
    window_end    DATETIME(6)     NULL,
    ttl_seconds   BIGINT          NOT NULL DEFAULT 0,
    reason        VARCHAR(1000)   COLLATE utf8mb4_unicode_ci NOT NULL DEFAULT '',
    detail        VARCHAR(1000)   NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    KEY ix_stop_signals_requested (requested_at),
    KEY ix_stop_signals_identity (identity, requested_at),
    CONSTRAINT ck_stop_signals_outcome CHECK (outcome IN ('accepted', 'refused', 'invalid', 'failed'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose StatementBegin
CREATE TRIGGER stop_signals_no_update BEFORE UPDATE ON stop_signals FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'stop_signals is append-only';
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER stop_signals_no_delete BEFORE DELETE ON stop_signals FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'stop_signals is append-only';
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS stop_signals_no_delete;
DROP TRIGGER IF EXISTS stop_signals_no_update;
DROP TABLE IF EXISTS stop_signals;
