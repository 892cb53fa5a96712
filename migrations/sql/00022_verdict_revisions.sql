-- +goose Up
-- Verdict revisions: an explicit re-review of a window (the console's
-- on-demand review) writes a new verdicts row, a revision, instead of
-- overwriting the row moderators already decided on. Every row is one
-- revision of its review key (room_id, window_start, window_end,
-- pipeline_version); exactly one revision of a key is current, and
-- decisions, takes, subjects, participants, campaign signals and stage rows
-- name the revision they concern by its row id (verdict_id), as they
-- always did: a row never changes its key or its revision number.
--
--   revision       1, 2, … per key, in the order the revisions were written.
--                  Every row from before this migration is revision 1 (the
--                  column's default: an instant ADD COLUMN, no row is
--                  rewritten), and current.
--   revision_slot  0 on the current revision; on a superseded one, its
--                  revision number. Every insert is a current revision
--                  (the default 0); superseding sets it with superseded_at,
--                  in one statement.
--   superseded_at  NULL on the current revision; when a later revision
--                  replaced it, UTC.
--
-- uq_review becomes (key, revision_slot). That one unique key makes the
-- schema hold at most one current revision per key (slot 0) and distinct
-- numbers for a key's superseded revisions, and it is still the target of
-- the queue path's INSERT … ON DUPLICATE KEY UPDATE: a new row has slot 0,
-- so a redelivered review finds and updates the current revision of its
-- key, never a superseded one. A second unique key, e.g. on
-- (key, revision), would make that upsert ambiguous (with two unique keys
-- matched by different rows MySQL updates whichever it meets first), and a
-- separate pointer to the current revision would cost the worker's save a
-- statement and every current read a join.
--
-- revision_slot is a plain column, not one generated from superseded_at:
-- MariaDB adds a STORED generated column, or a CHECK tying the two, only by
-- copying the table (writes blocked for its duration), and an index holding
-- a VIRTUAL column loses index condition pushdown (the sweeper's coverage
-- read filters window_end on uq_review's entries).
--
-- Two indexes gain revision_slot at their end, so that the reads of current
-- revisions stay index-only: the queue header's counts
-- (ix_verdicts_queue_counts, a covering index) and the analysts' most
-- severe rooms of a period (ix_verdicts_label_window, sorted on the index
-- before rows are read).
--
-- Online, on a large table (MariaDB 10.11; MySQL 8.0.29+ likewise): the
-- first statement is ALGORITHM=INSTANT, a metadata change under a brief
-- exclusive metadata lock (existing rows read the defaults: revision 1,
-- slot 0, not superseded). The second builds the three indexes with
-- ALGORITHM=INPLACE, LOCK=NONE: reads and writes go on while the indexes
-- are built (InnoDB logs concurrent changes and applies them at the end);
-- the exclusive metadata lock is taken only briefly at the start and at the
-- end, so a long transaction on verdicts delays the switch (and the
-- statements queued behind it), never the build. The old uq_review is
-- checked until the switch, so uniqueness holds throughout. The server
-- refuses the statement, rather than silently copying the table, where it
-- cannot honour these clauses.
--
-- Deploy order: migrate, then roll out. The code from before this
-- migration works on the new schema (its inserts are current revisions,
-- and its key lookups find the one revision a key has until a new console
-- writes a second); the code after it needs these columns.
ALTER TABLE verdicts
    ADD COLUMN revision INT UNSIGNED NOT NULL DEFAULT 1,
    ADD COLUMN revision_slot INT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN superseded_at DATETIME(6) NULL,
    ALGORITHM=INSTANT;

ALTER TABLE verdicts
    DROP KEY uq_review,
    ADD UNIQUE KEY uq_review (room_id, window_start, window_end, pipeline_version, revision_slot),
    DROP KEY ix_verdicts_queue_counts,
    ADD KEY ix_verdicts_queue_counts (status, label, category, finished_at, revision_slot),
    DROP KEY ix_verdicts_label_window,
    ADD KEY ix_verdicts_label_window (status, label, window_start, severity, confidence, revision_slot),
    ALGORITHM=INPLACE, LOCK=NONE;

-- +goose Down
-- Only a database with no superseded revision goes back: the old
-- uq_review cannot hold two rows of one key, and while there are some the
-- ALTER fails with a duplicate-key error and changes nothing.
ALTER TABLE verdicts
    DROP KEY uq_review,
    ADD UNIQUE KEY uq_review (room_id, window_start, window_end, pipeline_version),
    DROP KEY ix_verdicts_queue_counts,
    ADD KEY ix_verdicts_queue_counts (status, label, category, finished_at),
    DROP KEY ix_verdicts_label_window,
    ADD KEY ix_verdicts_label_window (status, label, window_start, severity, confidence);
ALTER TABLE verdicts DROP COLUMN superseded_at, DROP COLUMN revision_slot, DROP COLUMN revision;
