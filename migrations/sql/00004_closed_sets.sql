-- +goose Up
-- The closed sets of the verdict row are CHECK constraints, not ENUMs: a CHECK
-- is enforced whatever the session's sql_mode (MySQL 8.0.16+, MariaDB
-- 10.2+), while an ENUM outside strict mode silently stores '' for an
-- unknown value; a CHECK also keeps the column's plain string order for
-- analysts. The empty string is the "not applicable" value the store writes
-- (no label or action on a failed, expired or stopped verdict; no pool when
-- every attempt of a stage failed before a pool answered). Category is left
-- open on purpose: the judge validates it, and a new category must not need a
-- migration in lockstep. The values must match pipeline's constants; a test
-- in storage/mysql compares them. Adding a value: a new migration that drops
-- and re-adds the constraint (ALTER TABLE … DROP CONSTRAINT name, then ADD).
ALTER TABLE verdicts
    ADD CONSTRAINT ck_verdicts_status CHECK (status IN ('done', 'expired', 'stopped', 'failed')),
    ADD CONSTRAINT ck_verdicts_label  CHECK (label IN ('', 'abusive', 'suspicious', 'clean')),
    ADD CONSTRAINT ck_verdicts_action CHECK (action IN ('', 'none', 'warn', 'restrict', 'ban'));
ALTER TABLE verdict_stages
    ADD CONSTRAINT ck_verdict_stages_stage CHECK (stage IN ('triage', 'extract', 'vision', 'judge')),
    ADD CONSTRAINT ck_verdict_stages_pool  CHECK (pool IN ('', 'primary', 'fallback'));

-- +goose Down
ALTER TABLE verdict_stages DROP CONSTRAINT ck_verdict_stages_pool, DROP CONSTRAINT ck_verdict_stages_stage;
ALTER TABLE verdicts DROP CONSTRAINT ck_verdicts_action, DROP CONSTRAINT ck_verdicts_label, DROP CONSTRAINT ck_verdicts_status;
