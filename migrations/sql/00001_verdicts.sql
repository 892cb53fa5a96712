-- +goose Up
-- One row per review: the idempotency key (room, window, pipeline version) is
-- unique so that a redelivered review message upserts the same row. Times
-- are UTC, written by the application (UTC_TIMESTAMP), never the session
-- time zone.
--
-- Character set: every table is utf8mb4 (Korean text, emoji) whatever the
-- server's default is; identifiers and codes compare byte for byte
-- (utf8mb4_bin: room ids are case-sensitive, so 'AbC' and 'abc' are two
-- rooms), free text case-insensitively (utf8mb4_unicode_ci). 00003 converts
-- databases created before these options were declared.
CREATE TABLE IF NOT EXISTS verdicts (
    id                BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
    room_id           VARCHAR(128)     NOT NULL,
    window_start      DATETIME(6)      NOT NULL,
    window_end        DATETIME(6)      NOT NULL,
    pipeline_version  VARCHAR(64)      NOT NULL,
    run_id            VARCHAR(128)     NOT NULL,
    status            VARCHAR(16)      NOT NULL,
    label             VARCHAR(16)      NOT NULL DEFAULT '',
    category          VARCHAR(32)      NOT NULL DEFAULT '',
    severity          TINYINT UNSIGNED NOT NULL DEFAULT 0,
    confidence        DOUBLE           NOT NULL DEFAULT 0,
    action            VARCHAR(16)      NOT NULL DEFAULT '',
    rationale         TEXT             COLLATE utf8mb4_unicode_ci NULL,
    evidence_ids      JSON             NULL,
    early_exit        BOOLEAN          NOT NULL DEFAULT FALSE,
    injection_flagged BOOLEAN          NOT NULL DEFAULT FALSE,
    error             TEXT             COLLATE utf8mb4_unicode_ci NULL,
    attempts          INT UNSIGNED     NOT NULL DEFAULT 0,
    pools_used        VARCHAR(64)      NOT NULL DEFAULT '',
    fallback_used     BOOLEAN          NOT NULL DEFAULT FALSE,
    tokens_in         INT UNSIGNED     NOT NULL DEFAULT 0,
    tokens_out        INT UNSIGNED     NOT NULL DEFAULT 0,
    latency_ms        DOUBLE           NOT NULL DEFAULT 0,
    published_at      DATETIME(6)      NOT NULL,
    started_at        DATETIME(6)      NULL,
    finished_at       DATETIME(6)      NULL,
    created_at        DATETIME(6)      NOT NULL,
    updated_at        DATETIME(6)      NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_review (room_id, window_start, window_end, pipeline_version),
    KEY ix_verdicts_status_finished (status, finished_at),
    KEY ix_verdicts_run (run_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per stage that ran for a verdict; an early exit leaves fewer rows.
CREATE TABLE IF NOT EXISTS verdict_stages (
    verdict_id  BIGINT UNSIGNED NOT NULL,
    stage       VARCHAR(16)     NOT NULL,
    pool        VARCHAR(16)     NOT NULL DEFAULT '',
    model       VARCHAR(128)    NOT NULL DEFAULT '',
    attempts    INT UNSIGNED    NOT NULL DEFAULT 0,
    ttft_ms     DOUBLE          NOT NULL DEFAULT 0,
    latency_ms  DOUBLE          NOT NULL DEFAULT 0,
    tokens_in   INT UNSIGNED    NOT NULL DEFAULT 0,
    tokens_out  INT UNSIGNED    NOT NULL DEFAULT 0,
    output      JSON            NULL,
    error       TEXT            COLLATE utf8mb4_unicode_ci NULL,
    PRIMARY KEY (verdict_id, stage),
    CONSTRAINT fk_verdict_stages_verdict FOREIGN KEY (verdict_id) REFERENCES verdicts (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS verdict_stages;
DROP TABLE IF EXISTS verdicts;
