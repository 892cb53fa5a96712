-- +goose Up
-- One row per attempt of a batch run. A rerun of a window (an Airflow retry
-- or a manual backfill) keeps the run_id derived from the window and adds an
-- attempt, so the history of every window stays visible.
CREATE TABLE IF NOT EXISTS batch_runs (
    id                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    run_id             VARCHAR(128)    NOT NULL,
    attempt            INT UNSIGNED    NOT NULL,
    window_start       DATETIME(6)     NOT NULL,
    window_end         DATETIME(6)     NOT NULL,
    status             VARCHAR(16)     NOT NULL,
    query_execution_id VARCHAR(128)    NULL,
    rows_read          BIGINT UNSIGNED NOT NULL DEFAULT 0,
    published          BIGINT UNSIGNED NOT NULL DEFAULT 0,
    failed             BIGINT UNSIGNED NOT NULL DEFAULT 0,
    error              VARCHAR(1024)   COLLATE utf8mb4_unicode_ci NULL,
    started_at         DATETIME(6)     NOT NULL,
    finished_at        DATETIME(6)     NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_batch_runs_run_attempt (run_id, attempt),
    KEY ix_batch_runs_window (window_start, window_end)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS batch_runs;
