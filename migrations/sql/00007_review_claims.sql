-- +goose Up
-- One row per review being run: the claim a worker takes before its first
-- model call, so that a duplicate delivery on another pod waits or
-- acknowledges instead of calling the models again. expires_at is written by
-- the application (UTC); an expired row may be taken over by anyone, so a
-- worker killed mid-review blocks its review for one claim TTL at most. The
-- row is deleted when its review ends.
CREATE TABLE IF NOT EXISTS review_claims (
    room_id           VARCHAR(128)    NOT NULL,
    window_start      DATETIME(6)     NOT NULL,
    window_end        DATETIME(6)     NOT NULL,
    pipeline_version  VARCHAR(64)     NOT NULL,
    owner             VARCHAR(160)    NOT NULL,
    expires_at        DATETIME(6)     NOT NULL,
    claimed_at        DATETIME(6)     NOT NULL,
    PRIMARY KEY (room_id, window_start, window_end, pipeline_version),
    KEY review_claims_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS review_claims;
