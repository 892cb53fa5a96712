-- +goose Up
-- The console's audit sample: recall is measured against clean verdicts a
-- moderator looked at, so a share of clean verdicts is mixed into the queue
-- as audit items. Which ones must be random (not what the model or a
-- moderator picked), the same on every pod and every page, and cheap to
-- find among millions of verdicts:
--
--   verdicts.audit_bucket    the first 16 bits of SHA-1 over the review key
--                            (room_id|window_start|window_end|pipeline_version,
--                            the times as MariaDB prints DATETIME(6)), 0..65535;
--                            a stored generated column, so every row has it
--                            (old rows on this ALTER, new rows on insert)
--                            without the writers knowing. A verdict is an
--                            audit item when it is done, clean, and its bucket
--                            is below --audit-share x 65536; storage/mysql's
--                            AuditBucket computes the same value in Go.
--   ix_verdicts_audit        (status, label, audit_bucket): the audit read is
--                            a range on it, in its order, stopped by LIMIT.
--   moderator_decisions.audit  1 when the decision was made on an audit item;
--                            the moderator_feedback event carries it, and
--                            worker eval build-set takes its clean stratum
--                            from such decisions only.
ALTER TABLE verdicts
    ADD COLUMN audit_bucket SMALLINT UNSIGNED AS
        (CONV(LEFT(SHA1(CONCAT_WS('|', room_id, CAST(window_start AS CHAR), CAST(window_end AS CHAR), pipeline_version)), 4), 16, 10)) STORED,
    ADD KEY ix_verdicts_audit (status, label, audit_bucket);

ALTER TABLE moderator_decisions
    ADD COLUMN audit TINYINT(1) NOT NULL DEFAULT 0 AFTER note;

-- +goose Down
ALTER TABLE moderator_decisions
    DROP COLUMN audit;
ALTER TABLE verdicts
    DROP KEY ix_verdicts_audit,
    DROP COLUMN audit_bucket;
